"""The ASGI app the gateway's HTTP server runs: MCP requests beside the REST API's FastAPI stack.

``/mcp`` and ``/mcp/{name}`` go to the front door, their header values trimmed of surrounding
whitespace, behind only the guards MCP needs, each once: the request span, the Origin/Host check, the
body limit, and the contract's error answers (auth, the rate limit and namespace scoping are the
front door's own). Either path with a trailing slash is
redirected (307) to it, as FastAPI redirects its own routes. Every other request, odd ``/mcp/...``
paths included, goes to the FastAPI app and its middleware (idempotency, its exception handlers,
routing of every REST route). While the process admits fewer calls than its bound for now (its event
loop runs late) and they are all taken, ``POST /api/v1/tools/call`` is refused here (503 ``OVERLOADED``,
``Retry-After``), at a small part of what the same refusal costs past the REST stack.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import FastAPI
from starlette.datastructures import URL
from starlette.responses import RedirectResponse
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from toolmesh.loopback import is_loopback_host
from toolmesh.platform.config import Settings
from toolmesh_gateway.admission import Admission
from toolmesh_gateway.body_limit import BodyLimit
from toolmesh_gateway.errors import ErrorResponses, error_response
from toolmesh_gateway.front_door.mount import MCP_PATH
from toolmesh_gateway.observability import TracingMiddleware
from toolmesh_gateway.origin import OriginGuard
from toolmesh_gateway.routers.tools import call_tool


def guarded_mcp(app: ASGIApp, settings: Settings) -> ASGIApp:
    """``app`` behind the request span, the Origin/Host guard, the body limit and the error answers
    (outermost first)."""
    limited = BodyLimit(
        ErrorResponses(app), max_bytes=settings.max_request_body_bytes, max_depth=settings.max_request_json_depth
    )
    guarded = OriginGuard(
        limited,
        prefix=MCP_PATH,
        allowed_origins=settings.allowed_origins,
        allowed_hosts=settings.allowed_hosts,
        check_host=is_loopback_host(settings.host),
    )
    return TracingMiddleware(guarded)


class McpRoutes:
    """Serves the front door's routes (``Route``s of ASGI apps) to the request that matches one."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self._routes = tuple(routes)

    def match(self, scope: Scope) -> Scope | None:
        """The scope of the route ``scope`` fully matches (path params, the route, header values without
        the whitespace around them), or None."""
        if not scope["path"].startswith(MCP_PATH):
            return None
        for route in self._routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                return {**scope, **child, "route": route, "headers": _trimmed(scope["headers"])}
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a scope ``match`` returned."""
        await scope["route"].handle(scope, receive, send)


class GatewayEntry:
    """``/mcp`` routes to the guarded front door, the rest to the FastAPI app; a REST tool call that admission
    control refuses while the process is busy, before anything of it is read."""

    def __init__(self, app: FastAPI, routes: Iterable[Route], settings: Settings, admission: Admission) -> None:
        self._rest = app
        self._tool_call_path = app.url_path_for(call_tool.__name__)  # as the REST router declares it
        self._routes = McpRoutes(routes)
        self._mcp = guarded_mcp(self._routes, settings)
        self._admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == self._tool_call_path and scope["method"] == "POST":
            if (busy := self._admission.refuse_early()) is not None:
                await error_response(busy)(scope, receive, send)
                return
        matched = self._routes.match(scope) if scope["type"] == "http" else None
        if matched is not None:
            await self._mcp(matched, receive, send)
        elif scope["type"] == "http" and self._routes.match({**scope, "path": scope["path"].rstrip("/")}):
            url = URL(scope=scope)
            await RedirectResponse(url.replace(path=url.path.rstrip("/")), status_code=307)(scope, receive, send)
        else:
            await self._rest(scope, receive, send)


def _trimmed(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Header values without leading or trailing whitespace, which is no part of a field value (RFC 9110
    §5.5): ``Mcp-Name:   echo  `` names ``echo`` when checked against the body (2026-07-28)."""
    return [(name, value.strip(b" \t")) for name, value in headers]
