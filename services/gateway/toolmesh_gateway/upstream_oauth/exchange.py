"""Token exchange (RFC 8693): a caller's JWT of the front door's identity provider traded at an
upstream's authorization server for that caller's upstream access token, with no browser, for servers
registered with ``auth.token_exchange`` (by an owner or admin: the caller's token is sent there)."""

from __future__ import annotations

import httpx2

from toolmesh.contracts.upstream_auth import UpstreamAuth
from toolmesh.errors import ServerConnectionFailed
from toolmesh.oauth_tokens import TokenRequestFailed, granted, request_token
from toolmesh.platform.store.upstream_tokens import UpstreamGrant
from toolmesh_gateway.upstream_oauth.discovery import AuthorizationServer
from toolmesh_gateway.upstream_oauth.registration import preregistered

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


async def exchanged(
    client: httpx2.AsyncClient, found: AuthorizationServer, auth: UpstreamAuth, subject_token: str, scope: str | None
) -> UpstreamGrant:
    """The upstream grant ``subject_token`` (a JWT) is exchanged for, as ``auth``'s pre-registered client,
    asking for ``scope`` (the discovered one, widened by a step-up).

    Raises:
        ServerConnectionFailed: the authorization server refused the exchange, or could not be reached.
    """
    named = preregistered(auth, found.metadata)
    assert auth.token_exchange is not None and named is not None  # auth_problems made sure
    pending = UpstreamGrant(
        issuer=found.issuer,
        token_endpoint=auth.token_exchange.token_endpoint,
        access_token="",
        client_id=named.client_id,
        auth_method=named.auth_method,
        client_secret=named.client_secret,
        resource=found.resource,
        scope=scope,
    )
    form = {
        "grant_type": GRANT_TYPE,
        "subject_token": subject_token,
        "subject_token_type": JWT_TOKEN_TYPE,
        "requested_token_type": ACCESS_TOKEN_TYPE,
        **({"scope": scope} if scope else {}),
        **({"audience": auth.token_exchange.audience} if auth.token_exchange.audience else {}),
    }
    try:
        return granted(pending, await request_token(client, pending, form))
    except TokenRequestFailed as exc:
        raise ServerConnectionFailed(f"Token exchange failed: {exc.summary}", {"step": "token_exchange"}) from None
