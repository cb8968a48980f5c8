"""Requests to an upstream authorization server's token endpoint (OAuth 2.1): the authorization code
grant (the gateway's callback) and the refresh token grant (the session-worker), with the client
authentication methods ``none``, ``client_secret_basic`` and ``client_secret_post``.

Each request goes through the caller's egress-guarded client; the answer becomes an ``UpstreamGrant``.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import replace
from typing import Any

import httpx2

from toolmesh.platform.store.upstream_tokens import UpstreamGrant

TOKEN_TIMEOUT = httpx2.Timeout(15.0)
AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
"""Client authentication methods toolmesh uses, in its order of preference."""
MAX_TOKEN_CHARS = 16_384
"""The longest access or refresh token taken (a JWT with many claims is a few kilobytes); each is kept
in memory, sealed in the database and masked in the log."""
MAX_LIFETIME_SECONDS = 10 * 365 * 86400.0
"""The longest ``expires_in`` believed; past it (or not a positive finite number) the expiry is unknown."""
MAX_SCOPE_CHARS = 2048
"""The longest granted ``scope`` believed (it travels in the ``server.authorized`` event)."""
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+(?: [\x21\x23-\x5b\x5d-\x7e]+)*")
"""RFC 6749 section 3.3: scope tokens of printable ASCII but ``"`` and ``\\``, one space apart."""


class TokenRequestFailed(Exception):
    """The token endpoint refused or could not be reached; ``summary`` is safe to show (no token, no
    text the server chose)."""

    def __init__(self, summary: str) -> None:
        super().__init__(summary)
        self.summary = summary


def choose_auth_method(supported: list[str] | None, has_secret: bool) -> str:
    """The client authentication method to use: ``none`` for a public client, else the first of
    ``AUTH_METHODS`` the server supports (RFC 8414's default is ``client_secret_basic``)."""
    if not has_secret:
        return "none"
    offered = supported or ["client_secret_basic"]
    return next((m for m in AUTH_METHODS if m in offered and m != "none"), "client_secret_basic")


async def request_token(client: httpx2.AsyncClient, grant: UpstreamGrant, form: dict[str, str]) -> dict[str, Any]:
    """POST ``form`` to ``grant``'s token endpoint, authenticated as ``grant``'s client; its JSON answer.

    Raises:
        TokenRequestFailed: an error answer, a network failure or an answer without an access token.
    """
    body = dict(form)
    body["client_id"] = grant.client_id  # also beside Basic: authorization servers look the client up by it
    basic: dict[str, Any] = {}
    if grant.auth_method == "client_secret_basic" and grant.client_secret:
        basic["auth"] = httpx2.BasicAuth(grant.client_id, grant.client_secret)
    elif grant.auth_method == "client_secret_post" and grant.client_secret:
        body["client_secret"] = grant.client_secret
    if grant.resource:
        body["resource"] = grant.resource
    try:
        response = await client.post(
            grant.token_endpoint, data=body, headers={"Accept": "application/json"}, timeout=TOKEN_TIMEOUT, **basic
        )
    except httpx2.HTTPError as exc:
        raise TokenRequestFailed(f"token endpoint unreachable ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise TokenRequestFailed(f"token endpoint answered HTTP {response.status_code}")
    try:
        answer = response.json()
    except ValueError:
        raise TokenRequestFailed("token endpoint answered something other than JSON") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
        raise TokenRequestFailed("token endpoint answered without an access token")
    for field in ("access_token", "refresh_token"):
        if isinstance(answer.get(field), str) and len(answer[field]) > MAX_TOKEN_CHARS:
            raise TokenRequestFailed(f"token endpoint answered a {field} over {MAX_TOKEN_CHARS} characters")
    return answer


def _lifetime(expires_in: Any) -> float | None:
    """``expires_in`` in seconds when it is a number a token may live (a hostile ``1e300`` or ``NaN`` is not)."""
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float):
        return None
    try:
        seconds = float(expires_in)
    except OverflowError:  # an integer of hundreds of digits
        return None
    return seconds if math.isfinite(seconds) and 0 < seconds <= MAX_LIFETIME_SECONDS else None


def usable_scope(scope: Any) -> str | None:
    """``scope`` when it is a scope as RFC 6749 spells it and no longer than ``MAX_SCOPE_CHARS``."""
    if not isinstance(scope, str) or len(scope) > MAX_SCOPE_CHARS or not _SCOPE.fullmatch(scope):
        return None
    return scope


def granted(grant: UpstreamGrant, answer: dict[str, Any], now: float | None = None) -> UpstreamGrant:
    """``grant`` with the tokens of a token endpoint's ``answer`` (a refresh that sends no new refresh
    token keeps the old one); the scope ``grant`` had before its first answer is the one asked for
    (``requested_scope``), the answer's the one granted."""
    lifetime = _lifetime(answer.get("expires_in"))
    current = time.time() if now is None else now
    return replace(
        grant,
        access_token=str(answer["access_token"]),
        refresh_token=str(answer.get("refresh_token") or grant.refresh_token or "") or None,
        expires_at=current + lifetime if lifetime is not None else None,
        lifetime=lifetime,
        scope=usable_scope(answer.get("scope")) or grant.scope,
        requested_scope=grant.requested_scope or grant.scope,
    )


async def refreshed(client: httpx2.AsyncClient, grant: UpstreamGrant) -> UpstreamGrant:
    """``grant`` after the refresh token grant.

    Raises:
        TokenRequestFailed: no refresh token, or the token endpoint refused it.
    """
    if not grant.refresh_token:
        raise TokenRequestFailed("no refresh token")
    form = {"grant_type": "refresh_token", "refresh_token": grant.refresh_token}
    return granted(grant, await request_token(client, grant, form))
