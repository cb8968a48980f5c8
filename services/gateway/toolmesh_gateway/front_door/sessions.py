"""Who an MCP connection is: its caller and the one namespace it works in, kept in the ASGI scope."""

from __future__ import annotations

import functools
from urllib.parse import parse_qs

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from toolmesh.contracts.keys import Role
from toolmesh.errors import NamespaceNotFound, ToolmeshError, Unauthorized
from toolmesh_gateway.auth import Authenticator, Caller, Principal
from toolmesh_gateway.authorization_server.addresses import MCP_PATH, challenge, endpoint_path
from toolmesh_gateway.rate_limit import RateLimiter
from toolmesh_gateway.scope_headers import header

CALLER_KEY = "toolmesh.caller"
"""Scope key of the connection's ``Caller`` (principal, address, namespace)."""


def query_of(scope: Scope) -> dict[str, str]:
    """The request's query parameters (first value of each)."""
    raw = scope.get("query_string", b"")
    return dict(_parsed_query(raw.decode("latin-1") if isinstance(raw, bytes) else str(raw)))


@functools.lru_cache(maxsize=256)
def _parsed_query(text: str) -> tuple[tuple[str, str], ...]:
    """``text`` parsed once: a client sends the same query (``?mode=all``) on every request."""
    return tuple((k, v[0]) for k, v in parse_qs(text).items() if v)


def session_namespace(principal: Principal, requested: str | None) -> str:
    """The one namespace an MCP connection works in: the caller's, or (owner) the one it names."""
    if requested is None or requested == principal.namespace:
        return principal.namespace
    if principal.role is not Role.OWNER:
        raise NamespaceNotFound(f"Namespace not found: {requested}", {"namespace": requested})
    return requested


async def authenticate(authenticator: Authenticator, limiter: RateLimiter, scope: Scope) -> Caller:
    """The caller of an MCP HTTP request: bearer auth (an OAuth token only at the endpoint it is
    for), the rate limit, and its one namespace. A 401 names the endpoint's protected-resource
    metadata (RFC 9728), where an MCP client finds how to sign in."""
    client = scope.get("client")
    source = client[0] if client else None
    origin = str(Request(scope).base_url)
    named = endpoint_path(scope["path"])  # None: a path no token can be for
    endpoint = named or MCP_PATH
    try:
        principal = await authenticator.principal_from(header(scope, "authorization"), source)
        if principal.audience is not None and principal.audience != named:
            raise Unauthorized(f"This token is for {principal.audience}, not {endpoint}", {"endpoint": endpoint})
    except Unauthorized as exc:
        base = (authenticator.public_url or origin).rstrip("/")
        error = "invalid_token" if header(scope, "authorization") else None
        raise Unauthorized(exc.detail, exc.context, challenge=challenge(base, endpoint, error)) from exc
    limiter.check(principal.key_id)
    namespace = session_namespace(principal, query_of(scope).get("namespace"))
    return Caller(principal, source, namespace, origin=origin)


def request_caller(request: object) -> Caller | None:
    """The authenticated caller ``as_user`` put in an MCP request's scope (None without one)."""
    scope = getattr(request, "scope", None)
    caller = scope.get(CALLER_KEY) if isinstance(scope, dict) else None
    return caller if isinstance(caller, Caller) else None


def as_user(scope: Scope, caller: Caller, **extra: object) -> Scope:
    """The scope the SDK's session manager gets: the authenticated user, the caller, and ``extra``."""
    principal = caller.principal
    user = AuthenticatedUser(AccessToken(token="-", client_id=principal.name, scopes=[principal.role]))
    return {**scope, "user": user, CALLER_KEY: caller, **extra}


async def refuse(exc: ToolmeshError, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer an MCP HTTP request with the contract's error body."""
    await JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers() or None)(scope, receive, send)
