"""An MCP client signing in with the gateway's authorization server, step by step over HTTP: register,
authorize (the browser's first hop), the person's decision (as the consent page sends it, with an
API key), the token exchange, refresh, revocation, and an ``initialize`` to see 200 or 401."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.mcp_raw import INITIALIZE, MCP_ACCEPT

REDIRECT = "http://127.0.0.1:33418/callback"
"""A native client's loopback redirect URI (RFC 8252)."""
CONSENT_MARK = "/ui/#/consent/"


def challenge_of(verifier: str) -> str:
    """The S256 PKCE challenge of ``verifier``."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


@dataclass
class Client:
    """A registered client and the PKCE verifier of its current request."""

    client_id: str
    redirect_uri: str = REDIRECT
    verifier: str = field(default_factory=lambda: secrets.token_urlsafe(48))


@dataclass
class Tokens:
    """What ``/token`` answered."""

    access: str
    refresh: str
    body: dict[str, Any]


def query_of(url: str) -> dict[str, str]:
    """The query parameters of ``url`` (first value of each)."""
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


async def register(http: httpx.AsyncClient, redirect_uris: list[str] | None = None, **fields: Any) -> httpx.Response:
    """``POST /register`` (RFC 7591) of a public native client."""
    body = {
        "redirect_uris": redirect_uris or [REDIRECT],
        "client_name": "Test client",
        "scope": "mcp offline_access",
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        **fields,
    }
    return await http.post("/register", json=body)


async def registered(http: httpx.AsyncClient, redirect_uris: list[str] | None = None, **fields: Any) -> Client:
    """A newly registered client."""
    response = await register(http, redirect_uris, **fields)
    assert response.status_code == 201, response.text
    return Client(response.json()["client_id"], (redirect_uris or [REDIRECT])[0])


async def authorize(
    http: httpx.AsyncClient,
    client: Client,
    *,
    resource: str | None = None,
    redirect_uri: str | None = None,
    scope: str = "mcp offline_access",
    state: str = "st-1",
) -> httpx.Response:
    """``GET /authorize`` as the browser sends it (not followed)."""
    params = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": redirect_uri or client.redirect_uri,
        "code_challenge": challenge_of(client.verifier),
        "code_challenge_method": "S256",
        "scope": scope,
        "state": state,
    }
    if resource is not None:
        params["resource"] = resource
    return await http.get("/authorize", params=params, follow_redirects=False)


def request_id_of(response: httpx.Response) -> str:
    """The consent request id the ``/authorize`` redirect names."""
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert CONSENT_MARK in location, location
    return location.split(CONSENT_MARK, 1)[1]


async def decide(http: httpx.AsyncClient, request_id: str, api_key: str, allow: bool = True) -> httpx.Response:
    """The consent page's decision, signed with ``api_key``."""
    return await http.post(
        f"/api/v1/oauth/requests/{request_id}/decision",
        json={"allow": allow},
        headers={"Authorization": f"Bearer {api_key}"},
    )


async def consented_code(http: httpx.AsyncClient, client: Client, api_key: str, resource: str | None = None) -> str:
    """Authorize and allow as ``api_key``: the code the client's redirect URI receives."""
    request_id = request_id_of(await authorize(http, client, resource=resource))
    decision = await decide(http, request_id, api_key)
    assert decision.status_code == 200, decision.text
    answer = query_of(decision.json()["redirect_to"])
    assert answer["state"] == "st-1" and "iss" in answer, answer
    return answer["code"]


async def exchange(
    http: httpx.AsyncClient,
    client: Client,
    code: str,
    *,
    verifier: str | None = None,
    redirect_uri: str | None = None,
    client_id: str | None = None,
) -> httpx.Response:
    """``POST /token`` with ``grant_type=authorization_code``."""
    return await http.post(
        "/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri or client.redirect_uri,
            "code_verifier": verifier or client.verifier,
            "client_id": client_id or client.client_id,
        },
    )


def tokens_of(response: httpx.Response) -> Tokens:
    """The tokens of a 200 from ``/token``."""
    assert response.status_code == 200, response.text
    body = response.json()
    return Tokens(body["access_token"], body["refresh_token"], body)


async def signed_in(
    http: httpx.AsyncClient, api_key: str, resource: str | None = None, client: Client | None = None
) -> Tokens:
    """The whole flow: register (unless given a client), consent as ``api_key``, exchange."""
    client = client or await registered(http)
    code = await consented_code(http, client, api_key, resource)
    return tokens_of(await exchange(http, client, code))


async def refresh(http: httpx.AsyncClient, client_id: str, refresh_token: str) -> httpx.Response:
    """``POST /token`` with ``grant_type=refresh_token``."""
    return await http.post(
        "/token", data={"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
    )


async def revoke(http: httpx.AsyncClient, client_id: str, token: str) -> httpx.Response:
    """``POST /revoke`` (RFC 7009)."""
    return await http.post("/revoke", data={"token": token, "client_id": client_id})


async def initialize(http: httpx.AsyncClient, token: str, path: str = "/mcp") -> httpx.Response:
    """An MCP ``initialize`` at ``path`` with ``token``."""
    headers = {**MCP_ACCEPT, "Authorization": f"Bearer {token}"}
    return await http.post(path, json=INITIALIZE, headers=headers)


async def mcp_status(http: httpx.AsyncClient, token: str, path: str = "/mcp") -> int:
    """The status an ``initialize`` at ``path`` gets with ``token``."""
    return (await initialize(http, token, path)).status_code


async def connected(base: str, api_key: str, client_name: str = "Test client") -> tuple[Client, Tokens]:
    """A client named ``client_name`` signed in at ``base``'s ``/mcp`` as ``api_key``, with its own HTTP client."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        client = await registered(http, client_name=client_name)
        return client, await signed_in(http, api_key, client=client)


async def status_at(base: str, token: str, path: str = "/mcp") -> int:
    """``mcp_status`` at ``base`` with an HTTP client of its own."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        return await mcp_status(http, token, path)
