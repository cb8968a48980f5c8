"""The MCP server behind ``/mcp``: handlers of both modes, auth, and tool-list announcements.

``FrontDoor`` is an ASGI app (Streamable HTTP through the SDK's session manager) with the REST
API's bearer auth in front: the principal comes from the same ``Authenticator``, and an MCP
session is bound to the principal that opened it. ``?mode=all|search`` picks the mode of a
connection (default: ``TOOLMESH_MCP_MODE``). Tool calls go through ``ToolCalls``, like
``POST /api/v1/tools/call``; upstream progress reaches the client when it sent a progress token.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

import anyio
import mcp_types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from toolmesh.config import Settings
from toolmesh.contracts.rpc import ToolProgress
from toolmesh.contracts.search import SearchRequest
from toolmesh.contracts.tools import ToolCallRequest
from toolmesh.errors import ToolmeshError, Unauthorized
from toolmesh.search.service import SearchService
from toolmesh_gateway.auth import Authenticator, Principal
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.front_door import listing
from toolmesh_gateway.front_door.code_mode import CodeRunner
from toolmesh_gateway.tool_calls import ProgressSink, ToolCalls

log = logging.getLogger("toolmesh.gateway.mcp")
PRINCIPAL_KEY, MODE_KEY = "toolmesh.principal", "toolmesh.mode"
ANNOUNCE_TIMEOUT_SECONDS = 2.0
MAX_TRACKED_SESSIONS = 10_000
Ctx = ServerRequestContext[Any, Any]


class FrontDoor:
    """The gateway's MCP server; ``start()`` before serving, ``close()`` after.

    It reads the gateway's catalog through ``feed``, which its owner starts before and closes after.
    """

    def __init__(
        self,
        settings: Settings,
        authenticator: Authenticator,
        feed: CatalogFeed,
        calls: ToolCalls,
        search: SearchService,
    ) -> None:
        self._settings = settings
        self._auth = authenticator
        self._feed = feed
        self._calls = calls
        self._search = search
        self._listing: listing.AllTools | None = None
        self._sessions: dict[str, ServerSession] = {}  # legacy-era connections, for list_changed
        self._bus = InMemorySubscriptionBus()  # 2026-07-28 connections listen on subscriptions/listen
        self.code = CodeRunner(settings, feed.catalog, calls.call, self._search_for_code)
        self.server: Server[Any] = Server(
            "toolmesh",
            version="0.1.0",
            instructions="Tools of every MCP server registered with toolmesh.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self._bus),
        )
        self.server.middleware.append(self._track_session)
        self._manager = StreamableHTTPSessionManager(app=self.server)
        self._stop = anyio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the session manager and the announcer (in one runner task)."""
        self._runner = asyncio.create_task(self._run(), name="mcp-front-door")
        waiter = asyncio.ensure_future(self._ready.wait())
        await asyncio.wait({waiter, self._runner}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if self._runner.done():
            self._runner.result()

    async def close(self) -> None:
        """Stop serving MCP sessions and the sandbox pool (the catalog feed is its owner's to close)."""
        self._stop.set()
        if self._runner is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._runner), 5)
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._runner
        await self.code.close()

    async def _run(self) -> None:
        async with self._manager.run(), anyio.create_task_group() as tg:
            tg.start_soon(self._announce_changes)
            self._ready.set()
            await self._stop.wait()
            tg.cancel_scope.cancel()

    # -- ASGI ------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate, pick the mode, and hand the request to the SDK's session manager."""
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            principal = await self._auth.principal(headers.get("authorization"))
        except ToolmeshError as exc:
            extra = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
            await JSONResponse(exc.body(), status_code=exc.status, headers=extra)(scope, receive, send)
            return
        mode = (parse_qs(_query(scope)).get("mode") or [self._settings.mcp_mode])[0]
        if mode not in listing.MODES:
            detail = f"Unknown mode {mode!r}; use one of {', '.join(listing.MODES)}"
            body = {"detail": detail, "error_code": "VALIDATION_ERROR", "context": {"mode": mode}}
            await JSONResponse(body, status_code=400)(scope, receive, send)
            return
        user = AuthenticatedUser(AccessToken(token="-", client_id=principal.name, scopes=[principal.role]))
        scope = {**scope, "user": user, PRINCIPAL_KEY: principal, MODE_KEY: mode}
        await self._manager.handle_request(scope, receive, send)

    # -- handlers --------------------------------------------------------------------------------

    def _mode(self, ctx: Ctx) -> str:
        request = ctx.request
        scope = getattr(request, "scope", None) or {}
        return str(scope.get(MODE_KEY) or self._settings.mcp_mode)

    @staticmethod
    def _principal(ctx: Ctx) -> Principal | None:
        scope = getattr(ctx.request, "scope", None) or {}
        principal = scope.get(PRINCIPAL_KEY)
        return principal if isinstance(principal, Principal) else None

    def _all_tools(self) -> listing.AllTools:
        current = self._listing
        if current is None or current.version != self._feed.catalog.version:
            current = listing.all_tools(self._feed.catalog, self._settings.mcp_name_separator)
            self._listing = current
        return current

    async def _list_tools(self, ctx: Ctx, params: mcp_types.PaginatedRequestParams | None) -> mcp_types.ListToolsResult:
        if self._mode(ctx) == "search":
            return mcp_types.ListToolsResult(tools=listing.META_TOOLS)
        return mcp_types.ListToolsResult(tools=self._all_tools().tools)

    async def _call_tool(self, ctx: Ctx, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        arguments = dict(params.arguments or {})
        try:
            if self._mode(ctx) == "search":
                return await self._call_meta(ctx, params.name, arguments)
            pair = self._all_tools().names.resolve(params.name)
            server = self._feed.catalog.server_named(pair[0]) if pair else None
            if pair is None or server is None:
                request = _call_request(params.name, arguments)  # routing has the last word
            else:
                request = _call_request(pair[1], arguments, server.id)
            return listing.call_result(await self._calls.call(request, progress=_progress_sink(ctx)))
        except ToolmeshError as exc:
            return listing.error_result(exc)

    async def _call_meta(self, ctx: Ctx, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        if name == listing.SEARCH_TOOLS:
            principal = self._principal(ctx)
            search = SearchRequest.model_validate(
                {
                    "query": str(arguments.get("query", "")) or "*",
                    "limit": int(arguments.get("limit", 10)),
                    "server_filter": arguments.get("server_filter") or None,
                    "include_schemas": True,
                }
            )
            found = await self._search.search(search, namespace=principal.namespace if principal else None)
            tools = [
                {
                    "name": t.name,
                    "description": t.description,
                    "server": t.source_server.name,
                    "score": t.score,
                    "input_schema": t.input_schema,
                }
                for t in found.tools
            ]
            return listing.text_result({"tools": tools})
        if name == listing.CALL_TOOL:
            request = _call_request(str(arguments.get("name", "")), arguments.get("arguments") or {})
            return listing.call_result(await self._calls.call(request, progress=_progress_sink(ctx)))
        if name == listing.RUN:
            timeout = arguments.get("timeout_seconds")
            outcome = await self.code.run(str(arguments.get("code", "")), float(timeout) if timeout else None)
            return listing.text_result(outcome.body(), is_error=not outcome.ok)
        known = ", ".join(t.name for t in listing.META_TOOLS)
        return listing.text_result(f"Unknown tool {name!r} in search mode; tools: {known}", is_error=True)

    async def _search_for_code(self, query: str, limit: int, servers: list[str] | None) -> list[dict[str, Any]]:
        request = SearchRequest.model_validate({"query": query, "limit": limit, "server_filter": servers})
        found = await self._search.search(request)
        return [
            {
                "name": t.name,
                "pack": t.source_server.name,
                "tool": t.original_name,
                "description": t.description,
                "score": t.score,
            }
            for t in found.tools
        ]

    # -- list_changed ----------------------------------------------------------------------------

    async def _track_session(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        """Remember each legacy-era connection (by its session id) to announce tool-list changes to it."""
        if ctx.method == "notifications/initialized":
            headers = getattr(ctx.request, "headers", None)
            key = headers.get("mcp-session-id") if headers is not None else None
            self._sessions[key or str(id(ctx.session))] = ctx.session
            while len(self._sessions) > MAX_TRACKED_SESSIONS:  # closed sessions are only noticed on a send
                self._sessions.pop(next(iter(self._sessions)))
        return await call_next(ctx)

    async def _announce_changes(self) -> None:
        version = self._feed.catalog.version
        while True:
            version = await self._feed.wait_changed(version)
            self._listing = None
            await self._bus.publish(ToolsListChanged())
            for key, session in list(self._sessions.items()):
                try:
                    with anyio.fail_after(ANNOUNCE_TIMEOUT_SECONDS):
                        await session.send_tool_list_changed()
                except Exception as exc:  # the client went away: forget its connection
                    log.debug("dropping MCP session %s: %s", key, exc)
                    self._sessions.pop(key, None)


def _progress_sink(ctx: Ctx) -> ProgressSink | None:
    """Forwards progress to the client when its request carried a progress token."""
    meta: Any = ctx.meta or {}
    if not (meta.get("progress_token") or meta.get("progressToken")):
        return None

    async def sink(update: ToolProgress) -> None:
        await ctx.session.report_progress(update.progress, update.total, update.message)

    return sink


def _call_request(name: str, arguments: dict[str, Any], server_id: str | None = None) -> ToolCallRequest:
    return ToolCallRequest(name=name, arguments=arguments, server_id=server_id, timeout_seconds=None)


def _query(scope: Scope) -> str:
    raw = scope.get("query_string", b"")
    return raw.decode("latin-1") if isinstance(raw, bytes) else str(raw)
