"""An MCP client's side of signing in with OAuth, for the consent page's browser tests: registration
(RFC 7591), the authorization request with PKCE (whose Location is the console's consent page), the
code exchange, and a loopback HTTP server standing for the client's redirect URI (RFC 8252)."""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from tests.browser.console import Toolmesh

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "browser-test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Loopback:
    """The client's redirect URI: a server on 127.0.0.1 that records each path it is asked for and
    answers ``/frame`` with a page framing ``framed`` (for the clickjacking check)."""

    port: int
    seen: list[str] = field(default_factory=list)
    framed: str = ""
    arrived: Callable[[str], None] | None = None
    """Called (on the server's thread) with each path asked for, once it is in ``seen``."""

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/cb"


@contextmanager
def loopback() -> Iterator[Loopback]:
    """A loopback redirect target, stopped on exit."""
    state = Loopback(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.seen.append(self.path)
            if state.arrived is not None:
                state.arrived(self.path)
            if self.path == "/frame":
                frame = f'<iframe src="{state.framed}" width="900" height="600"></iframe>'
                body = f"<!doctype html><title>framing</title>{frame}"
            else:
                body = "<!doctype html><title>signed in</title><p>The client got its answer.</p>"
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def register(toolmesh: Toolmesh, redirect_uri: str, name: str) -> str:
    """``POST /register`` a public client (PKCE, no secret); its client_id."""
    body = {
        "client_name": name,
        "redirect_uris": [redirect_uri],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    }
    response = httpx.post(f"{toolmesh.url}/register", json=body)
    assert response.status_code == 201, response.text
    client_id: str = response.json()["client_id"]
    return client_id


@dataclass
class Authorization:
    """One authorization request: where /authorize sent the browser, and what the exchange needs."""

    location: str
    verifier: str
    state: str


def authorize(toolmesh: Toolmesh, client_id: str, redirect_uri: str, endpoint: str = "/mcp") -> Authorization:
    """``GET /authorize`` with an S256 challenge (the redirect not followed)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = secrets.token_urlsafe(12)
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": state,
        "scope": "mcp",
        "resource": f"{toolmesh.url}{endpoint}",
    }
    response = httpx.get(f"{toolmesh.url}/authorize", params=params, follow_redirects=False)
    assert response.status_code == 302, response.text
    return Authorization(response.headers["location"], verifier, state)


def exchange(toolmesh: Toolmesh, client_id: str, redirect_uri: str, code: str, verifier: str) -> str:
    """``POST /token`` for the code; the access token."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": client_id,
        "code_verifier": verifier,
    }
    response = httpx.post(f"{toolmesh.url}/token", data=form)
    assert response.status_code == 200, response.text
    token: str = response.json()["access_token"]
    return token


def mcp_initialize(toolmesh: Toolmesh, token: str) -> httpx.Response:
    """What ``/mcp`` answers an ``initialize`` with ``token``."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    return httpx.post(f"{toolmesh.url}/mcp", json=INITIALIZE, headers=headers, timeout=30)
