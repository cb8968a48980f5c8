"""An MCP client signing in to the gateway's own authorization server, as tests drive it over plain
HTTP: dynamic registration, ``/authorize`` (not followed: it answers with the console's consent page),
the consent page's decision as an API key, and ``/token`` with the PKCE verifier. What is left is a
connected app acting as that key. ``base`` is the gateway's address (the issuer: the address
requests reach)."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx

from toolmesh_gateway.authorization_server.addresses import CONSENT_PAGE

CONSENT_PREFIX = CONSENT_PAGE
REDIRECT_URI = "http://127.0.0.1:9/callback"
"""A loopback redirect URI (RFC 8252): nothing listens there, the tests read the code off the URL."""


@dataclass(frozen=True)
class Pending:
    """An authorization request waiting on the consent page, and what the client keeps for later."""

    client_id: str
    request_id: str
    verifier: str
    state: str
    resource: str


@dataclass(frozen=True)
class ConnectedApp:
    """The tokens a client got, and who it is."""

    client_id: str
    client_name: str
    access_token: str
    refresh_token: str


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


async def start_authorization(base: str, *, client_name: str = "Test IDE", endpoint: str = "/mcp") -> Pending:
    """Register a public client and send it to ``/authorize`` for ``endpoint``: the request waiting for consent."""
    base = base.rstrip("/")
    registration = {
        "client_name": client_name,
        "redirect_uris": [REDIRECT_URI],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "scope": "mcp offline_access",
    }
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        registered = await http.post("/register", json=registration)
        assert registered.status_code == 201, registered.text
        client_id = registered.json()["client_id"]
        verifier, state, resource = secrets.token_urlsafe(48), secrets.token_urlsafe(16), f"{base}{endpoint}"
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "code_challenge": _challenge(verifier),
            "code_challenge_method": "S256",
            "state": state,
            "scope": "mcp offline_access",
            "resource": resource,
        }
        authorized = await http.get("/authorize", params=query, follow_redirects=False)
    assert authorized.status_code == 302, authorized.text
    location = authorized.headers["location"]
    assert location.startswith(f"{base}{CONSENT_PREFIX}"), location
    return Pending(client_id, location.removeprefix(f"{base}{CONSENT_PREFIX}"), verifier, state, resource)


async def decide(base: str, pending: Pending, api_key: str, allow: bool = True) -> httpx.Response:
    """The consent page's decision, signed in as ``api_key``."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        return await http.post(
            f"/api/v1/oauth/requests/{pending.request_id}/decision",
            json={"allow": allow},
            headers={"Authorization": f"Bearer {api_key}"},
        )


async def exchange(base: str, pending: Pending, redirect_to: str) -> dict[str, str]:
    """``/token`` for the code in the consent's ``redirect_to`` (checked: our redirect URI, state, issuer)."""
    redirect = urlsplit(redirect_to)
    answer = {name: values[0] for name, values in parse_qs(redirect.query).items()}
    assert f"{redirect.scheme}://{redirect.netloc}{redirect.path}" == REDIRECT_URI
    assert (answer["state"], answer["iss"]) == (pending.state, base.rstrip("/")), answer
    body = {
        "grant_type": "authorization_code",
        "code": answer["code"],
        "redirect_uri": REDIRECT_URI,
        "client_id": pending.client_id,
        "code_verifier": pending.verifier,
        "resource": pending.resource,
    }
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        tokens = await http.post("/token", data=body)
    assert tokens.status_code == 200, tokens.text
    result: dict[str, str] = tokens.json()
    return result


async def connect_app(
    base: str, api_key: str, *, client_name: str = "Test IDE", endpoint: str = "/mcp"
) -> ConnectedApp:
    """Register a public client, have ``api_key`` allow it at ``endpoint`` and exchange the code."""
    pending = await start_authorization(base, client_name=client_name, endpoint=endpoint)
    decided = await decide(base, pending, api_key)
    assert decided.status_code == 200, decided.text
    tokens = await exchange(base, pending, decided.json()["redirect_to"])
    return ConnectedApp(pending.client_id, client_name, tokens["access_token"], tokens["refresh_token"])


async def mcp_status(base: str, token: str, endpoint: str = "/mcp") -> int:
    """The HTTP status ``endpoint`` answers an MCP ``initialize`` carrying ``token``."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        response = await http.post(endpoint, json=initialize, headers=headers)
    return response.status_code
