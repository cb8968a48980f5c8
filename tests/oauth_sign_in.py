"""An MCP client's sign-in at the gateway's authorization server, step by step over HTTP (each step
may go to another gateway replica): register, authorize (its 302 names the consent request), the
person's decision as an API key, and the code exchanged for tokens."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

import httpx

REDIRECT = "http://127.0.0.1:9/callback"
"""A loopback redirect URI nothing listens on: the tests read the code from the decision's answer."""


@dataclass(frozen=True)
class Pending:
    """An authorization request waiting for consent, and the PKCE verifier its client keeps."""

    client_id: str
    request_id: str
    verifier: str


async def register(http: httpx.AsyncClient, redirect: str = REDIRECT) -> str:
    """A public client registered dynamically (RFC 7591); its id."""
    answer = await http.post("/register", json={"redirect_uris": [redirect], "token_endpoint_auth_method": "none"})
    assert answer.status_code == 201, answer.text
    client_id: str = answer.json()["client_id"]
    return client_id


async def authorize(
    http: httpx.AsyncClient, client_id: str, resource: str | None = None, redirect: str = REDIRECT
) -> Pending:
    """``GET /authorize`` with a fresh PKCE pair; the consent request its 302 names."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "state-1",
    } | ({"resource": resource} if resource else {})
    answer = await http.get("/authorize", params=query)
    assert answer.status_code == 302, answer.text
    return Pending(client_id, answer.headers["location"].rsplit("/", 1)[1], verifier)


async def allow(http: httpx.AsyncClient, pending: Pending, key: str) -> str:
    """The person signed in with ``key`` allows the request; the code it gives."""
    answer = await http.post(
        f"/api/v1/oauth/requests/{pending.request_id}/decision",
        json={"allow": True},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert answer.status_code == 200, answer.text
    return dict(parse_qsl(urlsplit(answer.json()["redirect_to"]).query))["code"]


async def exchange(http: httpx.AsyncClient, pending: Pending, code: str, redirect: str = REDIRECT) -> httpx.Response:
    """``POST /token`` with the code and the verifier."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect,
        "code_verifier": pending.verifier,
        "client_id": pending.client_id,
    }
    return await http.post("/token", data=form)


async def refresh(http: httpx.AsyncClient, client_id: str, refresh_token: str) -> httpx.Response:
    """``POST /token`` with a refresh token."""
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
    return await http.post("/token", data=form)


async def sign_in(http: httpx.AsyncClient, key: str, resource: str | None = None) -> dict[str, str]:
    """Every step on one gateway: the token answer (and ``client_id``)."""
    pending = await authorize(http, await register(http), resource)
    tokens = await exchange(http, pending, await allow(http, pending, key))
    assert tokens.status_code == 200, tokens.text
    return {**tokens.json(), "client_id": pending.client_id}
