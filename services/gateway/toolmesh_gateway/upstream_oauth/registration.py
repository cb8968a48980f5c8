"""toolmesh's client at an upstream's authorization server: the one the config names (registered in
advance), else the gateway's Client ID Metadata Document where the authorization server takes one,
else one registered by dynamic client registration (RFC 7591)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx2
from mcp.client.auth import OAuthRegistrationError
from mcp.client.auth.utils import (
    create_client_registration_request,
    handle_registration_response,
    should_use_client_metadata_url,
)
from mcp.shared.auth import OAuthClientMetadata, OAuthMetadata
from pydantic import AnyUrl

from toolmesh.contracts.upstream_auth import UpstreamAuth
from toolmesh.errors import ServerConnectionFailed
from toolmesh.oauth_tokens import MAX_TOKEN_CHARS, choose_auth_method
from toolmesh_gateway.upstream_oauth.client_urls import CLIENT_NAME


@dataclass(frozen=True)
class OAuthClient:
    """A client id, its secret if it has one, and how it authenticates at the token endpoint."""

    client_id: str
    client_secret: str | None
    auth_method: str


def preregistered(auth: UpstreamAuth, metadata: OAuthMetadata) -> OAuthClient | None:
    """The client the config names (``auth.client_id``, registered in advance), authenticating as the
    config says, else as ``choose_auth_method`` picks; None when it names none."""
    if auth.client_id is None:
        return None
    supported = metadata.token_endpoint_auth_methods_supported
    method = auth.token_endpoint_auth_method or choose_auth_method(supported, auth.client_secret is not None)
    return OAuthClient(auth.client_id, auth.client_secret, method)


ClientKey = tuple[str, str, str, str, str, str | None]
"""Server id, issuer, token endpoint, registration endpoint, redirect URI and scope."""


class RegisteredClients:
    """Clients this gateway registered, by server and the endpoints, redirect URI and scope they were
    registered for: every user of a per-user server authorizes as the same client instead of
    registering one per authorization. Another server never gets the client (and its secret), even
    when its metadata names the same registration endpoint: it could name a token endpoint of its own."""

    def __init__(self, limit: int = 1000) -> None:
        self._limit = limit
        self._known: dict[ClientKey, OAuthClient] = {}

    def get(self, key: ClientKey) -> OAuthClient | None:
        """The client registered for ``key``, if any."""
        return self._known.get(key)

    def keep(self, key: ClientKey, registered: OAuthClient) -> None:
        """Remember ``registered`` (the oldest is forgotten past the limit)."""
        if len(self._known) >= self._limit:
            self._known.pop(next(iter(self._known)))
        self._known[key] = registered


async def client_for(
    client: httpx2.AsyncClient,
    auth: UpstreamAuth,
    metadata: OAuthMetadata,
    redirect_uri: str,
    scope: str | None,
    registered: RegisteredClients,
    document_url: str | None = None,
    *,
    server_id: str,
) -> OAuthClient:
    """The client to authorize as (one ``registered`` already for ``server_id`` when it knows it; the
    gateway's ``document_url`` when the authorization server takes Client ID Metadata Documents).

    Raises:
        ServerConnectionFailed: no client id configured and the authorization server registers none.
    """
    if (named := preregistered(auth, metadata)) is not None:
        return named
    if should_use_client_metadata_url(metadata, document_url):
        assert document_url is not None
        return OAuthClient(document_url, None, "none")
    if metadata.registration_endpoint is None:
        raise ServerConnectionFailed(
            "OAuth registration failed: the authorization server offers no dynamic client registration; "
            "register toolmesh there and set auth.client_id (and auth.client_secret)",
            {"step": "registration"},
        )
    key = (
        server_id,
        str(metadata.issuer),
        str(metadata.token_endpoint),
        str(metadata.registration_endpoint),
        redirect_uri,
        scope,
    )
    known = registered.get(key)
    if known is not None:
        return known
    wanted = OAuthClientMetadata(
        redirect_uris=[AnyUrl(redirect_uri)],
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        client_name=CLIENT_NAME,
        scope=scope,
    )
    request = create_client_registration_request(metadata, wanted, str(metadata.issuer))
    try:
        response = await client.send(request)
        info = await handle_registration_response(response)
    except (httpx2.HTTPError, OAuthRegistrationError) as exc:
        raise ServerConnectionFailed(
            f"OAuth registration failed ({type(exc).__name__})", {"step": "registration"}
        ) from None
    if max(len(str(info.client_id)), len(info.client_secret or "")) > MAX_TOKEN_CHARS:
        # Kept in memory for every later authorization and sealed in each flow: an answer may hold 1 MiB.
        raise ServerConnectionFailed(
            f"OAuth registration failed: the client id or secret is over {MAX_TOKEN_CHARS} characters",
            {"step": "registration"},
        )
    method = info.token_endpoint_auth_method or ("client_secret_basic" if info.client_secret else "none")
    made = OAuthClient(str(info.client_id), info.client_secret, method)
    registered.keep(key, made)
    return made
