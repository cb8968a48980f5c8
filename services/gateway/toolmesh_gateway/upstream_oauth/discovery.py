"""Where an upstream's authorization server is: RFC 9728 protected-resource metadata (from the 401's
``WWW-Authenticate`` or the well-known URLs), then RFC 8414 / OpenID metadata of the server it names.

Every URL is fetched with the server's egress-guarded client; redirects are not followed.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    issuers_match,
)
from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

from toolmesh.egress.http import egress_refused
from toolmesh.egress.policy import EgressRefused, rest_endpoint
from toolmesh.errors import ServerConnectionFailed
from toolmesh.oauth_tokens import usable_scope

DISCOVERY_TIMEOUT = httpx2.Timeout(15.0)
_PROBE = {"jsonrpc": "2.0", "id": 0, "method": "ping"}


@dataclass(frozen=True)
class AuthorizationServer:
    """What discovery found: the resource to ask a token for, its authorization server and scopes."""

    resource: str
    issuer: str
    metadata: OAuthMetadata
    scope: str | None


def failed(words: str) -> ServerConnectionFailed:
    return ServerConnectionFailed(f"OAuth discovery failed: {words}", {"step": "discovery"})


async def get_json(client: httpx2.AsyncClient, url: str) -> httpx2.Response | None:
    try:
        return await client.get(url, timeout=DISCOVERY_TIMEOUT, headers={"Accept": "application/json"})
    except httpx2.HTTPError as exc:
        if egress_refused(exc) is not None:
            raise failed(f"{url} is refused by the egress policy") from None
        return None


async def _challenge(client: httpx2.AsyncClient, url: str, transport: str) -> httpx2.Response | None:
    """The upstream's answer to a request without credentials (its 401 names its metadata): an SSE
    server's stream, an MCP ``ping`` to a Streamable HTTP server, a REST tool server's ``GET /tools``
    (the tool list is what such a server guards; its ``/health`` may well be open to anyone)."""
    try:
        if transport == "SSE":
            return await client.get(url, timeout=DISCOVERY_TIMEOUT, headers={"Accept": "text/event-stream"})
        if transport == "REST":
            tools = rest_endpoint(url, "/tools")
            return await client.get(tools, timeout=DISCOVERY_TIMEOUT, headers={"Accept": "application/json"})
        headers = {"Accept": "application/json, text/event-stream"}
        return await client.post(url, json=_PROBE, timeout=DISCOVERY_TIMEOUT, headers=headers)
    except EgressRefused:
        raise failed("the server's URL is refused by the egress policy") from None
    except httpx2.HTTPError as exc:
        if egress_refused(exc) is not None:
            raise failed("the server's URL is refused by the egress policy") from None
        raise failed(f"the server could not be reached ({type(exc).__name__})") from None


async def _resource_metadata(
    client: httpx2.AsyncClient, url: str, challenge: httpx2.Response | None
) -> ProtectedResourceMetadata:
    named = extract_resource_metadata_from_www_auth(challenge) if challenge is not None else None
    for candidate in build_protected_resource_metadata_discovery_urls(named, url):
        response = await get_json(client, candidate)
        if response is not None and (metadata := await handle_protected_resource_response(response)):
            return metadata
    raise failed("the server publishes no protected-resource metadata (RFC 9728)")


async def server_metadata(client: httpx2.AsyncClient, issuer: str, url: str) -> OAuthMetadata:
    for candidate in build_oauth_authorization_server_metadata_discovery_urls(issuer, url):
        response = await get_json(client, candidate)
        if response is None:
            continue
        go_on, metadata = await handle_auth_metadata_response(response)
        if metadata is not None:
            if not issuers_match(str(metadata.issuer), issuer):
                raise failed("the authorization server's metadata names another issuer")
            return metadata
        if not go_on:
            break
    raise failed("the authorization server publishes no metadata (RFC 8414 / OpenID discovery)")


async def discover(
    client: httpx2.AsyncClient, url: str, *, transport: str, scopes: list[str] | None
) -> AuthorizationServer:
    """The authorization server of the upstream at ``url`` reached by ``transport`` (``SSE``, ``HTTP``
    or ``REST``; its protected-resource metadata must be for ``url``), and the scope to ask for:
    ``scopes`` when configured, else the challenge's, else the metadata's ``scopes_supported`` (a
    scope that is not one as RFC 6749 spells it, or longer than ``MAX_SCOPE_CHARS``, is left out).

    Raises:
        ServerConnectionFailed: a step of discovery found nothing usable (its words say which).
    """
    challenge = await _challenge(client, url, transport)
    resource = await _resource_metadata(client, url, challenge)
    expected = resource_url_from_server_url(url)
    if not check_resource_allowed(requested_resource=expected, configured_resource=str(resource.resource)):
        # RFC 9728 section 3.3: else an upstream naming another server's metadata would be sent the
        # token an authorization server issues for that other server.
        raise failed(f"the protected-resource metadata is for {resource.resource}, not for this server ({expected})")
    if not resource.authorization_servers:
        raise failed("the protected-resource metadata names no authorization server")
    issuer = str(resource.authorization_servers[0])
    metadata = await server_metadata(client, issuer, url)
    if "S256" not in (metadata.code_challenge_methods_supported or ["S256"]):
        raise failed("the authorization server does not support PKCE S256")
    scope = " ".join(scopes) if scopes else None
    if scope is None and challenge is not None and challenge.status_code in (401, 403):
        scope = usable_scope(extract_scope_from_www_auth(challenge))
    if scope is None and resource.scopes_supported:
        scope = usable_scope(" ".join(resource.scopes_supported))
    return AuthorizationServer(str(resource.resource), str(metadata.issuer), metadata, scope)
