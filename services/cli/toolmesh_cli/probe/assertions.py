"""Grants by assertion (RFC 7523 jwt-bearer): a workload's identity token, and an enterprise
identity provider's ID-JAG (SEP-990).

Enterprise-managed authorization runs on the ``mcp`` SDK's ``IdentityAssertionOAuthProvider``;
what it leaves to its caller is here: the authorization server, taken from the MCP server's
protected-resource metadata (RFC 9728), and the ID-JAG, from a token exchange (RFC 8693) at the
identity provider. The SDK has no jwt-bearer grant for a public client (workload identity
federation, SEP-1933, presents only its assertion), so ``WorkloadIdentityAuth`` does that flow, on
the SDK's discovery helpers.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

import httpx2
from mcp.client.auth import OAuthFlowError, OAuthTokenError, TokenStorage
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_token_response_scopes,
    validate_metadata_issuer,
)
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthMetadata, ProtectedResourceMetadata
from mcp.shared.auth_utils import resource_url_from_server_url

EXCHANGE_TIMEOUT = httpx2.Timeout(30.0)
TOKEN_EXCHANGE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"


@dataclass(frozen=True)
class EnterpriseLogin:
    """The user's identity at the enterprise identity provider and the client registered at the MCP
    server's authorization server."""

    id_token: str
    idp_token_endpoint: str
    idp_client_id: str
    client_id: str
    client_secret: str


async def _protected_resource(
    http: httpx2.AsyncClient, server_url: str, hinted: str | None = None
) -> ProtectedResourceMetadata:
    for url in build_protected_resource_metadata_discovery_urls(hinted, server_url):
        metadata = await handle_protected_resource_response(await http.send(create_oauth_metadata_request(url)))
        if metadata is not None and metadata.authorization_servers:
            return metadata
    raise OAuthFlowError(f"{server_url} publishes no protected resource metadata naming an authorization server")


async def authorization_server_of(server_url: str) -> str:
    """The first authorization server the MCP server's protected-resource metadata names."""
    async with httpx2.AsyncClient(timeout=EXCHANGE_TIMEOUT) as http:
        metadata = await _protected_resource(http, server_url)
    return str(metadata.authorization_servers[0])


def id_jag_exchange(login: EnterpriseLogin) -> Callable[[str, str], Awaitable[str]]:
    """The ID-JAG for an authorization server and resource: the ID token exchanged at the identity provider."""

    async def exchange(audience: str, resource: str) -> str:
        form = {
            "grant_type": TOKEN_EXCHANGE_GRANT_TYPE,
            "requested_token_type": ID_JAG_TOKEN_TYPE,
            "audience": audience,
            "resource": resource,
            "subject_token": login.id_token,
            "subject_token_type": ID_TOKEN_TYPE,
            "client_id": login.idp_client_id,
        }
        async with httpx2.AsyncClient(timeout=EXCHANGE_TIMEOUT) as http:
            response = await http.post(login.idp_token_endpoint, data=form)
        if response.status_code != 200:
            raise OAuthTokenError(f"the identity provider refused the token exchange ({response.status_code})")
        token = response.json().get("access_token")
        if not isinstance(token, str):
            raise OAuthTokenError("the identity provider's token exchange returned no ID-JAG")
        return token

    return exchange


async def enterprise_auth(server_url: str, login: EnterpriseLogin, storage: TokenStorage) -> httpx2.Auth:
    """The SDK's SEP-990 provider for ``server_url``, at the authorization server its metadata names."""
    return IdentityAssertionOAuthProvider(
        server_url,
        storage,
        login.client_id,
        login.client_secret,
        await authorization_server_of(server_url),
        id_jag_exchange(login),
        token_endpoint_auth_method="client_secret_basic",
    )


class WorkloadIdentityAuth(httpx2.Auth):
    """The jwt-bearer grant of a public client presenting a workload's identity token: on a 401,
    discover the authorization server, exchange the assertion once, retry with the access token.
    A refused exchange is not retried (the assertion would be refused again)."""

    requires_response_body = True

    def __init__(self, server_url: str, client_id: str, assertion: str) -> None:
        self._server_url = server_url
        self._client_id = client_id
        self._assertion = assertion
        self._access_token: str | None = None

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Send ``request``, with the token once there is one; get one on the first 401."""
        if self._access_token is not None:
            request.headers["Authorization"] = f"Bearer {self._access_token}"
        response = yield request
        if response.status_code != 401 or self._access_token is not None:
            return
        resource: ProtectedResourceMetadata | None = None
        hinted = extract_resource_metadata_from_www_auth(response)
        for url in build_protected_resource_metadata_discovery_urls(hinted, self._server_url):
            resource = await handle_protected_resource_response((yield create_oauth_metadata_request(url)))
            if resource is not None and resource.authorization_servers:
                break
        if resource is None or not resource.authorization_servers:
            raise OAuthFlowError(f"{self._server_url} names no authorization server")
        issuer = str(resource.authorization_servers[0])
        server: OAuthMetadata | None = None
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, self._server_url):
            found, server = await handle_auth_metadata_response((yield create_oauth_metadata_request(url)))
            if not found or server is not None:
                break
        if server is None:
            raise OAuthFlowError(f"no authorization server metadata for {issuer}")
        validate_metadata_issuer(server, issuer)
        form = {
            "grant_type": JWT_BEARER_GRANT_TYPE,
            "assertion": self._assertion,
            "client_id": self._client_id,
            "resource": str(resource.resource) if resource.resource else resource_url_from_server_url(self._server_url),
        }
        scope = extract_scope_from_www_auth(response)
        if scope:
            form["scope"] = scope
        answer = yield httpx2.Request("POST", str(server.token_endpoint), data=form)
        if answer.status_code != 200:
            body = (await answer.aread()).decode(errors="replace")
            raise OAuthTokenError(f"the authorization server refused the assertion ({answer.status_code}): {body}")
        self._access_token = (await handle_token_response_scopes(answer)).access_token
        request.headers["Authorization"] = f"Bearer {self._access_token}"
        yield request
