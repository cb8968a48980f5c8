"""An OAuth-protected MCP server with its own authorization server, for tests (127.0.0.1 only).

    python tests/peers/oauth_server.py --port N [--user NAME] [--transport http|sse|rest] [--access-seconds S]
                                       [--client-id ID --client-secret S --redirect-uri URI --auth-method M]

One process, one origin: the ``mcp`` SDK's authorization-server routes (metadata, dynamic client
registration, ``/authorize``, ``/token`` with the authorization code and refresh token grants) on an
in-memory provider that approves at once whoever is signed in at it (``--user``, default ``alice``;
``POST /control/login {"user": NAME}`` signs in another, ``alice`` and ``bob`` being its known
users) — the authorization URL answers 302 to the client's redirect URI with ``code``, ``state`` and
``iss`` — and a Streamable HTTP MCP server at ``/mcp`` (``--transport sse``: HTTP+SSE at ``/sse``)
behind the SDK's bearer auth and protected-resource metadata (RFC 9728), whose 401 names that
metadata. ``--transport rest``: a REST tool server (the protocol of ``rest_server.py``) at ``/api``
instead — ``GET /api/health``, ``GET /api/tools``, ``POST /api/tools/execute`` — each behind the
same bearer auth (``/control/stats`` counts the requests it refused, ``refused``).
``--access-seconds`` is the access tokens' lifetime (3600). ``--client-id`` pre-registers a
confidential client (its secret, its one redirect URI, ``client_secret_basic`` or
``client_secret_post``). ``--cimd`` advertises Client ID Metadata Documents
(``client_id_metadata_document_supported``) and takes an ``http(s)`` client id as the URL of its
document, fetched when the client first shows up. ``--exchange-jwks FILE`` serves token exchange
(RFC 8693) at ``POST /exchange`` for the pre-registered client: a ``subject_token`` JWT signed by a
key of that JWKS gives an access token (no refresh token) for its ``sub`` with the scope asked for
(``admin`` only for a ``sub`` whose local part is ``alice``). Tools: ``whoami`` (the
user the token was issued for), ``echo``, and ``admin_echo``, which needs the scope ``admin`` on top
of ``mcp``: a call with a token lacking it is answered 403 with ``WWW-Authenticate: Bearer
error="insufficient_scope", scope="admin"`` (MCP 2025-11-25 scope challenge; counted in
``scope_challenges``), and the authorization server grants ``admin`` to ``alice`` only (to anyone
else it issues the rest of the scope asked for). ``POST /control/expire`` makes every access token
issued so far invalid (an expiry the client did not see coming), ``POST /control/revoke`` every
access and refresh token (the user withdrew the grant); ``GET /control/stats`` counts the grants and
the requests that carried a bearer token, and lists every access and refresh token issued (so a test
can look for them where they must not be).
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, RequireAuthMiddleware
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

ACCESS_SECONDS = 3600
REST_TOOLS: list[dict[str, Any]] = [
    {"name": "whoami", "description": "The user this call was authorized as"},
    {
        "name": "echo",
        "description": "Echo the text back",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "admin_echo",
        "description": "Echo the text back, for a token with the scope admin",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {"name": "forbidden", "description": "Always answers a plain 403: the application forbids it"},
]
SCOPES = "mcp admin"
"""Every client may ask for these (the SDK refuses a scope a client was not registered with)."""
ADMINS = frozenset({"alice"})
"""The users the authorization server grants ``admin``."""
SCOPED_TOOLS = {"admin_echo": "admin"}
"""Tools whose call needs a scope on top of ``mcp``."""


class MemoryProvider:
    """The SDK's ``OAuthAuthorizationServerProvider``, in memory, approving ``user`` at once."""

    def __init__(self, issuer: str, user: str, cimd: bool = False, access_seconds: int = ACCESS_SECONDS) -> None:
        self.issuer = issuer
        self.access_seconds = access_seconds
        self.user = user
        self.cimd = cimd
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.issued: list[str] = []
        self.stats = {
            "code_grants": 0,
            "refresh_grants": 0,
            "registrations": 0,
            "documents_fetched": 0,
            "scope_challenges": 0,
        }

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if client_id not in self.clients and self.cimd and client_id.startswith(("http://", "https://")):
            async with httpx.AsyncClient() as fetch:
                document = (await fetch.get(client_id)).json()
            self.stats["documents_fetched"] += 1
            if document.get("client_id") != client_id:
                return None
            # Such a client may ask for this server's one scope (the SDK refuses any scope a client lacks).
            self.clients[client_id] = OAuthClientInformationFull.model_validate(document | {"scope": SCOPES})
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info.model_copy(update={"scope": SCOPES})
        self.stats["registrations"] += 1

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        scopes = [scope for scope in params.scopes or ["mcp"] if scope != "admin" or self.user in ADMINS]
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=scopes,
            expires_at=time.time() + 300,
            client_id=str(client.client_id),
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=self.user,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state, iss=self.issuer)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    def _tokens(self, client_id: str, scopes: list[str], resource: str | None, subject: str | None) -> OAuthToken:
        access, refresh = f"at-{secrets.token_urlsafe(24)}", f"rt-{secrets.token_urlsafe(24)}"
        expires = int(time.time()) + self.access_seconds
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires, resource=resource, subject=subject
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource, subject=subject
        )
        self.issued += [access, refresh]
        return OAuthToken(
            access_token=access, refresh_token=refresh, expires_in=self.access_seconds, scope=" ".join(scopes)
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.stats["code_grants"] += 1
        code = authorization_code
        return self._tokens(str(client.client_id), code.scopes, code.resource, code.subject)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.stats["refresh_grants"] += 1
        old = refresh_token
        return self._tokens(str(client.client_id), scopes or old.scopes, old.resource, old.subject)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is not None:
            self.stats["bearer_requests"] = self.stats.get("bearer_requests", 0) + 1
            key = f"bearer_requests_of_{found.subject}"
            self.stats[key] = self.stats.get(key, 0) + 1
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


class ScopeGuard:
    """Answers the call of a tool of ``SCOPED_TOOLS`` whose bearer token lacks the tool's scope with 403
    ``insufficient_scope`` naming it (the SDK's own check covers the whole endpoint, not a tool)."""

    def __init__(self, app: Any, provider: MemoryProvider, metadata_url: str) -> None:
        self.app = app
        self.provider = provider
        self.metadata_url = metadata_url

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        messages, body = [], b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        needed = self._needed(body)
        header = dict(scope["headers"]).get(b"authorization", b"").decode()
        token = self.provider.access.get(header.removeprefix("Bearer "))
        if needed is not None and token is not None and needed not in token.scopes:
            self.provider.stats["scope_challenges"] += 1
            challenge = (
                f'Bearer error="insufficient_scope", scope="{needed}", resource_metadata="{self.metadata_url}", '
                f'error_description="this tool needs the scope {needed}"'
            )
            await JSONResponse({"error": "insufficient_scope"}, 403, {"WWW-Authenticate": challenge})(
                scope, receive, send
            )
            return

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    @staticmethod
    def _needed(body: bytes) -> str | None:
        try:
            message = json.loads(body)
        except ValueError:
            return None
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return None
        return SCOPED_TOOLS.get(str((message.get("params") or {}).get("name")))


class AdvertiseDocuments(BaseHTTPMiddleware):
    """Adds ``client_id_metadata_document_supported`` to the authorization server's metadata."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        if request.url.path != "/.well-known/oauth-authorization-server" or response.status_code != 200:
            return response
        body = b"".join([chunk async for chunk in response.body_iterator])  # type: ignore[attr-defined]
        metadata = json.loads(body) | {"client_id_metadata_document_supported": True}
        return JSONResponse(metadata)


def rest_routes(provider: MemoryProvider, resource: str) -> list[Route]:
    """The REST tool protocol at ``resource`` (``/health``, ``/tools``, ``/tools/execute``), every
    request without a valid bearer token refused with the 401 naming the protected-resource metadata."""
    metadata = build_resource_metadata_url(resource)  # type: ignore[arg-type]

    class Guarded:
        """An ASGI app (not a request handler, so Starlette passes it the scope) that counts and
        refuses a request without a valid bearer token before ``handler`` sees it."""

        def __init__(self, handler: Any) -> None:
            async def app(scope: Scope, receive: Receive, send: Send) -> None:
                response = await handler(Request(scope, receive))
                await response(scope, receive, send)

            self._required = RequireAuthMiddleware(app, ["mcp"], metadata)

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if not isinstance(scope.get("user"), AuthenticatedUser):
                provider.stats["refused"] = provider.stats.get("refused", 0) + 1
            await self._required(scope, receive, send)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def tools(request: Request) -> JSONResponse:
        return JSONResponse({"tools": REST_TOOLS})

    async def execute(request: Request) -> JSONResponse:
        body = await request.json()
        token = get_access_token()
        if body.get("tool") == "whoami":
            return JSONResponse({"user": token.subject if token is not None else None})
        if body.get("tool") == "echo":
            return JSONResponse({"text": (body.get("arguments") or {}).get("text")})
        if body.get("tool") == "admin_echo":
            if token is None or "admin" not in token.scopes:
                provider.stats["scope_challenges"] += 1
                challenge = f'Bearer error="insufficient_scope", scope="admin", resource_metadata="{metadata}"'
                return JSONResponse({"error": "insufficient_scope"}, 403, {"WWW-Authenticate": challenge})
            return JSONResponse({"text": f"admin: {(body.get('arguments') or {}).get('text')}"})
        if body.get("tool") == "forbidden":
            return JSONResponse({"error": {"code": "FORBIDDEN", "message": "not for you"}}, status_code=403)
        failure = {"code": "TOOL_NOT_FOUND", "message": "no such tool", "details": {"tool": body.get("tool")}}
        return JSONResponse({"error": failure}, status_code=404)

    path = resource.removeprefix(provider.issuer)
    return [
        Route(f"{path}/health", Guarded(health), methods=["GET"]),
        Route(f"{path}/tools", Guarded(tools), methods=["GET"]),
        Route(f"{path}/tools/execute", Guarded(execute), methods=["POST"]),
    ]


def build(
    port: int,
    user: str,
    client: OAuthClientInformationFull | None = None,
    transport: str = "http",
    cimd: bool = False,
    exchange_jwks: dict[str, Any] | None = None,
    access_seconds: int = ACCESS_SECONDS,
) -> Any:
    """The app: authorization server and MCP (or REST tool) server on ``http://127.0.0.1:port``;
    ``client`` registered."""
    issuer = f"http://127.0.0.1:{port}"
    provider = MemoryProvider(issuer, user, cimd, access_seconds)
    if client is not None:
        provider.clients[str(client.client_id)] = client
    auth = AuthSettings(
        issuer_url=issuer,
        resource_server_url=f"{issuer}/{ {'sse': 'sse', 'rest': 'api'}.get(transport, 'mcp') }",
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=SCOPES.split()),
        required_scopes=["mcp"],
        validate_token_resource=True,
    )
    server = MCPServer("oauth-peer", auth_server_provider=provider, auth=auth)

    @server.tool()
    def whoami() -> str:
        """The user this call was authorized as."""
        token = get_access_token()
        return token.subject or "" if token is not None else ""

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    def admin_echo(text: str) -> str:
        """Echo the text back, for a token with the scope ``admin`` (``ScopeGuard``)."""
        return f"admin: {text}"

    if exchange_jwks is not None:
        trusted = jwt.PyJWKSet.from_dict(exchange_jwks)

        @server.custom_route("/exchange", methods=["POST"])
        async def exchange(request: Request) -> JSONResponse:
            form = await request.form()
            known = provider.clients.get(str(form.get("client_id")))
            basic = request.headers.get("authorization", "")
            secret = form.get("client_secret") or (
                base64.b64decode(basic.removeprefix("Basic ")).decode().partition(":")[2] if basic else None
            )
            if known is None or secret != known.client_secret:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
                return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
            try:
                header = jwt.get_unverified_header(str(form.get("subject_token")))
                key = next(k for k in trusted.keys if k.key_id == header.get("kid")).key
                claims = jwt.decode(
                    str(form["subject_token"]), key, algorithms=["RS256"], options={"verify_aud": False}
                )
            except (jwt.PyJWTError, StopIteration, KeyError):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            provider.stats["exchanges"] = provider.stats.get("exchanges", 0) + 1
            provider.stats.setdefault("exchange_scopes", []).append(str(form.get("scope") or ""))
            subject = str(claims["sub"])
            asked = str(form.get("scope") or "mcp").split()
            scopes = [s for s in asked if s in SCOPES.split() and (s != "admin" or subject.partition("@")[0] in ADMINS)]
            issued = provider._tokens(str(known.client_id), scopes or ["mcp"], str(form.get("resource") or ""), subject)
            answer = issued.model_dump(exclude_none=True, exclude={"refresh_token"})
            return JSONResponse({**answer, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})

    @server.custom_route("/control/expire", methods=["POST"])
    async def expire(request: Request) -> JSONResponse:
        dropped = len(provider.access)
        provider.access.clear()
        return JSONResponse({"expired": dropped})

    @server.custom_route("/control/login", methods=["POST"])
    async def login(request: Request) -> JSONResponse:
        provider.user = str((await request.json())["user"])
        return JSONResponse({"user": provider.user})

    @server.custom_route("/control/revoke", methods=["POST"])
    async def revoke(request: Request) -> JSONResponse:
        provider.access.clear()
        provider.refresh.clear()
        return JSONResponse({"revoked": True})

    @server.custom_route("/control/stats", methods=["GET"])
    async def stats(request: Request) -> JSONResponse:
        return JSONResponse({**provider.stats, "issued": provider.issued})

    app = server.sse_app() if transport == "sse" else server.streamable_http_app()
    if transport == "rest":
        app.router.routes.extend(rest_routes(provider, f"{issuer}/api"))
    if cimd:
        app.add_middleware(AdvertiseDocuments)
    path = {"sse": "sse", "rest": "api"}.get(transport, "mcp")
    return ScopeGuard(app, provider, f"{issuer}/.well-known/oauth-protected-resource/{path}")


def main() -> None:
    """Serve until stopped."""
    parser = argparse.ArgumentParser(description="An OAuth-protected MCP server for tests")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", default="alice")
    parser.add_argument("--transport", choices=["http", "sse", "rest"], default="http")
    parser.add_argument("--access-seconds", type=int, default=ACCESS_SECONDS)
    parser.add_argument("--client-id")
    parser.add_argument("--client-secret")
    parser.add_argument("--redirect-uri")
    parser.add_argument("--auth-method", default="client_secret_basic")
    parser.add_argument("--cimd", action="store_true", help="take Client ID Metadata Documents")
    parser.add_argument("--exchange-jwks", help="serve token exchange for JWTs signed by this JWKS file")
    args = parser.parse_args()
    client = None
    if args.client_id:
        client = OAuthClientInformationFull(
            client_id=args.client_id,
            client_secret=args.client_secret,
            redirect_uris=[args.redirect_uri],
            token_endpoint_auth_method=args.auth_method,
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=SCOPES,
        )
    trusted = json.loads(Path(args.exchange_jwks).read_text()) if args.exchange_jwks else None
    app = build(args.port, args.user, client, args.transport, args.cimd, trusted, args.access_seconds)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
