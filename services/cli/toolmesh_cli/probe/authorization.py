"""The OAuth 2.1 client of an MCP server, on the ``mcp`` SDK's ``OAuthClientProvider``.

The SDK does discovery (RFC 9728, RFC 8414, OpenID), registration (Client ID Metadata Document or
dynamic registration), PKCE S256, ``resource`` (RFC 8707), scope selection and step-up, refresh,
``iss`` checks (RFC 9207) and issuer-bound credentials. What it leaves to its caller is here: where
tokens are kept, and how the user's authorization comes back — fetched without a browser
(``HeadlessAuthorization``) or received on a loopback port (``LoopbackAuthorization``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, OAuthFlowError
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

AUTHORIZE_TIMEOUT = httpx2.Timeout(30.0)
"""Bound on the headless fetch of the authorization URL."""
CALLBACK_SECONDS = 300.0
"""How long the loopback port waits for the browser to come back."""
CLIENT_NAME = "toolmesh"


@dataclass
class MemoryTokenStorage:
    """Tokens and client registration held for one process (the SDK's ``TokenStorage``)."""

    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        """The tokens obtained so far."""
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Keep new tokens."""
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The client registration in use."""
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Keep a new client registration."""
        self.client_info = client_info


class Authorization(Protocol):
    """How an authorization URL is taken to the user and its answer brought back."""

    redirect_uri: str

    async def redirect(self, authorization_url: str) -> None:
        """Hand the authorization URL on."""
        ...

    async def callback(self) -> AuthorizationCodeResult:
        """The authorization server's answer: code, state and issuer."""
        ...


def redirect_result(location: str) -> AuthorizationCodeResult:
    """The ``code``, ``state`` and ``iss`` of a redirect back to the client; an ``error`` raises."""
    query = parse_qs(urlsplit(location).query)
    first = {name: values[0] for name, values in query.items() if values}
    if "error" in first:
        raise OAuthFlowError(f"authorization refused: {first['error']} {first.get('error_description', '')}".strip())
    if "code" not in first:
        raise OAuthFlowError("the authorization server's redirect carries no code")
    return AuthorizationCodeResult(code=first["code"], state=first.get("state"), iss=first.get("iss"))


@dataclass
class HeadlessAuthorization:
    """Fetches the authorization URL without a browser and takes the code from the redirect's
    ``Location`` (an authorization server that approves without a login page: test servers,
    pre-consented clients)."""

    redirect_uri: str = "http://127.0.0.1/callback"
    _result: AuthorizationCodeResult | None = field(default=None, init=False)

    async def redirect(self, authorization_url: str) -> None:
        """GET the URL, not following the redirect."""
        async with httpx2.AsyncClient(timeout=AUTHORIZE_TIMEOUT, follow_redirects=False) as http:
            response = await http.get(authorization_url)
        location = response.headers.get("location")
        if not location:
            raise OAuthFlowError(f"the authorization endpoint answered {response.status_code} without a redirect")
        self._result = redirect_result(location)

    async def callback(self) -> AuthorizationCodeResult:
        """The answer taken from the last redirect."""
        if self._result is None:
            raise OAuthFlowError("no authorization was fetched")
        result, self._result = self._result, None
        return result


class LoopbackAuthorization:
    """Prints the authorization URL and waits for the browser's redirect on ``127.0.0.1:<port>``."""

    def __init__(self, show: Callable[[str], None], seconds: float = CALLBACK_SECONDS) -> None:
        self._show = show
        self._seconds = seconds
        self._answer: asyncio.Future[AuthorizationCodeResult] | None = None
        self._server: asyncio.Server | None = None
        self.redirect_uri = ""

    async def __aenter__(self) -> LoopbackAuthorization:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.redirect_uri = f"http://127.0.0.1:{port}/callback"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def redirect(self, authorization_url: str) -> None:
        """Show the URL to the user and start waiting for the answer."""
        self._answer = asyncio.get_running_loop().create_future()
        self._show(authorization_url)

    async def callback(self) -> AuthorizationCodeResult:
        """The browser's redirect, within the waiting time."""
        if self._answer is None:
            raise OAuthFlowError("no authorization was started")
        try:
            return await asyncio.wait_for(self._answer, self._seconds)
        except TimeoutError as exc:
            raise OAuthFlowError(f"no authorization arrived within {self._seconds:.0f} s") from exc

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), 10.0)
            target = request_line.decode("latin-1").split(" ")[1] if request_line.count(b" ") >= 2 else "/"
            body = self._settle(target)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        finally:
            writer.close()

    def _settle(self, target: str) -> bytes:
        if not target.startswith("/callback") or self._answer is None or self._answer.done():
            return b"Nothing to do here.\n"
        try:
            self._answer.set_result(redirect_result(target))
        except OAuthFlowError as exc:
            self._answer.set_exception(exc)
            return f"Authorization failed: {exc}\n".encode()
        return b"Authorized. You can close this window.\n"


@dataclass(frozen=True)
class ClientIdentity:
    """Who the client says it is: a Client ID Metadata Document URL, a pre-registered client, or
    neither (then the authorization server's dynamic registration)."""

    metadata_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    auth_method: str | None = None


def oauth_provider(
    server_url: str, authorization: Authorization, identity: ClientIdentity, storage: MemoryTokenStorage
) -> OAuthClientProvider:
    """The SDK's OAuth client for ``server_url`` (an ``httpx2.Auth``), registered as ``identity``."""
    metadata = OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[authorization.redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
    )
    if identity.client_id is not None and storage.client_info is None:
        storage.client_info = OAuthClientInformationFull(
            client_id=identity.client_id,
            client_secret=identity.client_secret,
            redirect_uris=[authorization.redirect_uri],  # type: ignore[list-item]
            token_endpoint_auth_method=identity.auth_method
            or ("client_secret_basic" if identity.client_secret else "none"),
        )
    redirect: Callable[[str], Awaitable[None]] = authorization.redirect
    return OAuthClientProvider(
        server_url,
        metadata,
        storage,
        redirect_handler=redirect,
        callback_handler=authorization.callback,
        client_metadata_url=identity.metadata_url,
    )
