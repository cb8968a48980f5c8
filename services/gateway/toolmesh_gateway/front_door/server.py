"""The MCP server behind ``/mcp``: handlers of both modes and auth (list changes: ``announcements``).

``FrontDoor`` is an ASGI app (Streamable HTTP through the SDK's session manager, its sessions
shared by the gateway replicas: ``shared_sessions``) with the REST API's bearer auth in front:
the principal comes from the same ``Authenticator``, and an MCP session is bound to the key that
opened it and to one namespace — the principal's, or for the owner the one ``?namespace=`` names.
``?mode=all|search`` picks the mode of a connection (default: ``TOOLMESH_MCP_MODE``). Tool calls
go through ``ToolCalls``, like ``POST /api/v1/tools/call``; upstream progress reaches the client
when it sent a progress token.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Sequence
from typing import Any

import anyio
import mcp_types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from nats.js.kv import KeyValue
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from toolmesh.contracts.tools import ToolCallRequest
from toolmesh.errors import ToolmeshError, Unauthorized
from toolmesh.platform.config import Settings
from toolmesh.search.service import SearchService
from toolmesh_gateway.admission import SHED
from toolmesh_gateway.auth import Authenticator, Caller
from toolmesh_gateway.bundle_view import BundleView
from toolmesh_gateway.bundles import Bundle
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.front_door import listing
from toolmesh_gateway.front_door.aggregate import Aggregate
from toolmesh_gateway.front_door.announcements import ListAnnouncer
from toolmesh_gateway.front_door.client_links import ClientLink, ClientLinks, release_if_deleted
from toolmesh_gateway.front_door.code_mode import CodeRunner
from toolmesh_gateway.front_door.eras import CACHE_HINTS
from toolmesh_gateway.front_door.forwarded_calls import forward_call
from toolmesh_gateway.front_door.input_required import InputBridge, bridged
from toolmesh_gateway.front_door.rpc_errors import mcp_error, url_elicitation
from toolmesh_gateway.front_door.search_cursor import SearchCursors
from toolmesh_gateway.front_door.search_mode import SearchMode
from toolmesh_gateway.front_door.sessions import as_user, authenticate, query_of, refuse, request_caller
from toolmesh_gateway.front_door.shared_sessions import SharedSessionManager, SharedSessions
from toolmesh_gateway.front_door.task_extension import runs_as_task
from toolmesh_gateway.front_door.task_quota import TaskQuota
from toolmesh_gateway.front_door.task_records import TaskRecords
from toolmesh_gateway.front_door.task_status import TaskFeed, TaskListen
from toolmesh_gateway.front_door.tasks import TaskCall, Tasks
from toolmesh_gateway.front_door.upstream_requests import UpstreamRequests, progress_sink
from toolmesh_gateway.front_door.upstream_tasks import UpstreamTasks, passed_through
from toolmesh_gateway.policies.checks import CallSubject
from toolmesh_gateway.rate_limit import RateLimiter
from toolmesh_gateway.tool_calls import ToolCalls

log = logging.getLogger("toolmesh.gateway.mcp")
MODE_KEY, BUNDLE_KEY = "toolmesh.mode", "toolmesh.bundle"
TASK_CALL_MAX_SECONDS = 3600.0
"""The longest a task's call may run (the longest any tool call may: ``ToolCallRequest``)."""
Ctx = ServerRequestContext[Any, Any]
_SERVING: contextvars.ContextVar[tuple[str, CatalogView] | None] = contextvars.ContextVar(
    "toolmesh_front_door_view", default=None
)
"""The mode and view of the request being served (the SDK's header check asks by tool name only)."""


class AggregateServer(Server[Any]):
    """The lowlevel server of ``/mcp``, announcing list changes of tools, resources and prompts."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        """The initialize result's payload, with every ``listChanged`` announced."""
        options = notification_options or NotificationOptions(True, True, True)
        return super().create_initialization_options(options, experimental_capabilities, extensions)


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
        cursor_keys: Sequence[bytes],
        rate_limiter: RateLimiter,
        forwarder: Forwarder,
        links: ClientLinks,
        bridge: InputBridge,
        sessions: SharedSessions,
        tasks_kv: KeyValue,
        tasks_kept: float,
        task_feed: TaskFeed,
    ) -> None:
        self._settings = settings
        self._auth = authenticator
        self._limiter = rate_limiter
        self._feed = feed
        self._calls = calls
        self._forwarder = forwarder
        self.links = links
        self.bridge = bridge
        self._listings: dict[str, listing.AllTools] = {}  # by namespace
        self.announcer = ListAnnouncer(feed, self._listings.clear)
        self.task_feed = task_feed
        records = TaskRecords(tasks_kv)
        quota = TaskQuota(settings.task_max_per_key)
        upstream_tasks = UpstreamTasks(records, forwarder, links, self._view, tasks_kept, quota)
        self.tasks = Tasks(records, links, tasks_kept, self._task_call, quota, upstream_tasks.relay)
        self.code = CodeRunner(settings)
        self._search_mode = SearchMode(search, calls, self.code, SearchCursors(cursor_keys))
        self.server: Server[Any] = AggregateServer(
            "toolmesh",
            cache_hints=CACHE_HINTS,
            version="0.1.0",
            instructions="Tools of every MCP server registered with toolmesh.",
            on_list_tools=self._list_tools,
            get_tool_input_schema=self._input_schema,
            on_subscriptions_listen=TaskListen(self.announcer.bus, task_feed, self.tasks.revive),
        )
        # Spans come from the gateway's HTTP and NATS hops; the SDK's per-message span is dropped (cost).
        self.server.middleware.clear()
        self.server.add_notification_handler(
            "notifications/initialized", mcp_types.NotificationParams, self.announcer.track
        )
        self.upstream = UpstreamRequests(self._view, forwarder, links, bridge, upstream_tasks)
        self.aggregate = Aggregate(self._view, self.upstream, forwarder, links, settings.mcp_name_separator)
        self.aggregate.install(self.server)
        self.tasks.install(self.server)
        self.server.add_request_handler("tools/call", mcp_types.CallToolRequestParams, self._call_tool)
        self._manager = sessions.manager(self.server, self.announcer.adopted)  # the gateway's BodyLimit guards it
        self.managers: list[SharedSessionManager] = [self._manager]
        self.on_changes = self.announcer.on_changes  # other endpoints' announcers
        self._stop = anyio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Follow the tasks' changes; start the session manager and the announcer (in one runner task)."""
        await self.task_feed.start()
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
        await self.tasks.close()
        await self.task_feed.close()
        await self.bridge.close()
        await self.links.close()

    async def _run(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            for manager in self.managers:
                await stack.enter_async_context(manager.run())
            await self._serve()

    async def _serve(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.announcer.run)
            self._ready.set()
            await self._stop.wait()
            tg.cancel_scope.cancel()

    # -- ASGI ------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``/mcp``: authenticate and serve the aggregate (a key limited to endpoints may not)."""
        if scope["type"] != "http":
            return
        try:
            caller = await authenticate(self._auth, self._limiter, scope)
            caller.principal.require_aggregate_access()
        except ToolmeshError as exc:
            await refuse(exc, scope, receive, send)
            return
        await self.serve(scope, receive, send, caller)

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, caller: Caller, bundle: Bundle | None = None
    ) -> None:
        """Serve the aggregate, or one endpoint's bundle of it, to an authenticated caller."""
        mode = query_of(scope).get("mode") or self._settings.mcp_mode
        if mode not in listing.MODES:
            detail = f"Unknown mode {mode!r}; use one of {', '.join(listing.MODES)}"
            body = {"detail": detail, "error_code": "VALIDATION_ERROR", "context": {"mode": mode}}
            await JSONResponse(body, status_code=400)(scope, receive, send)
            return
        serving = _SERVING.set((mode, self._view_of(caller, bundle)))
        try:
            await self._manager.handle_request(
                as_user(scope, caller, **{MODE_KEY: mode, BUNDLE_KEY: bundle}), receive, send
            )
        finally:
            _SERVING.reset(serving)
        await release_if_deleted(scope, self.links, self._forwarder, self._feed)

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema of the tool a 2026-07-28 ``tools/call`` names, in the view of the request
        being served: what the SDK checks its ``Mcp-Param-*`` headers against (rather than listing
        every tool of the view for each call). None for the meta-tools of search mode (no such headers)."""
        serving = _SERVING.get()
        if serving is None or serving[0] == "search":
            return None
        view = serving[1]
        pair = self._all_tools(view).names.resolve(name)
        server = view.server_named(pair[0]) if pair else None
        tool = self._feed.catalog.tool(server.id, pair[1]) if server is not None and pair else None
        return tool.input_schema if tool is not None else None

    # -- handlers --------------------------------------------------------------------------------

    def _mode(self, ctx: Ctx) -> str:
        return str(_scope_of(ctx).get(MODE_KEY) or self._settings.mcp_mode)

    @staticmethod
    def _caller(ctx: Ctx) -> Caller:
        caller = request_caller(ctx.request)
        if caller is None:
            raise Unauthorized("MCP request without an authenticated caller")
        return caller

    def _view(self, ctx: Ctx) -> CatalogView:
        """What the connection sees: its namespace, narrowed to its endpoint's bundle if it has one."""
        bundle = _scope_of(ctx).get(BUNDLE_KEY)
        return self._view_of(self._caller(ctx), bundle if isinstance(bundle, Bundle) else None)

    def _view_of(self, caller: Caller, bundle: Bundle | None) -> CatalogView:
        if bundle is not None:
            return BundleView(self._feed.catalog, caller.scope, bundle)
        return self._feed.catalog.view(caller.scope)

    def _all_tools(self, view: CatalogView) -> listing.AllTools:
        bundle = view.bundle if isinstance(view, BundleView) and view.bundle is not None else None
        key = f"{view.namespace}/{bundle.id if bundle else ''}"
        current = self._listings.get(key)
        if current is None or current.version != self._feed.catalog.version:
            current = listing.all_tools(view, self._settings.mcp_name_separator)
            self._listings[key] = current
        return current

    async def _list_tools(self, ctx: Ctx, params: mcp_types.PaginatedRequestParams | None) -> mcp_types.ListToolsResult:
        if self._mode(ctx) == "search":
            return mcp_types.ListToolsResult(tools=listing.META_TOOLS)
        return mcp_types.ListToolsResult(tools=self._all_tools(self._view(ctx)).tools)

    async def _call_tool(
        self, ctx: Ctx, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult | dict[str, Any]:
        arguments = dict(params.arguments or {})
        try:
            if self._mode(ctx) == "search":
                return await self._call_meta(ctx, params.name, arguments)
            view = self._view(ctx)
            pair = self._all_tools(view).names.resolve(params.name)
            server = view.server_named(pair[0]) if pair else None
            if pair is None or server is None:
                request = _call_request(params.name, arguments)  # routing has the last word
            else:
                request = _call_request(pair[1], arguments, server.id)
            return await self._call(ctx, request)
        except ToolmeshError as exc:
            if (elicitation := url_elicitation(exc, ctx.session.client_capabilities)) is not None:
                raise elicitation from exc
            if isinstance(exc, SHED):  # a refusal of the gateway, not the tool's: a JSON-RPC error
                raise mcp_error(exc) from exc
            return listing.error_result(exc)

    async def _call(
        self, ctx: Ctx, request: ToolCallRequest
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult | dict[str, Any]:
        """A tool call in the session's namespace, as its caller; in the 2026-07-28 era through the
        ``InputBridge``, or as a task (``tasks``: a ``CreateTaskResult``)."""
        caller = self._caller(ctx)
        if request.server_id is not None:
            tool = self._feed.catalog.tool(request.server_id, request.name)
            if runs_as_task(ctx, tool) and tool is not None and not self._passed_through(ctx, request.server_id):
                return await self.tasks.start(ctx, request.server_id, tool, request.arguments)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and (relayed := await self._relayed(ctx, request, caller)):
            return relayed
        call = functools.partial(
            self._calls.call, request, caller, progress=progress_sink(ctx), view=self._view(ctx), surface="mcp"
        )
        if bridged(ctx):
            outcome = await self.bridge.run(ctx, lambda link: call(client=link.ref))
            return outcome if isinstance(outcome, mcp_types.InputRequiredResult) else listing.call_result(outcome)
        call_id = self._calls.new_call_id()
        with self.links.call(ctx, call_id) as client:
            body = await call(client=client, call_id=call_id)
        return listing.call_result(body)

    def _passed_through(self, ctx: Ctx, server_id: str) -> bool:
        """Whether the upstream runs this call's task itself (``upstream_tasks``)."""
        server = self._feed.catalog.server(server_id)
        return server is not None and passed_through(ctx, self._view(ctx).offer(server).description)

    async def _relayed(self, ctx: Ctx, request: ToolCallRequest, caller: Caller) -> dict[str, Any] | None:
        """A 2026-07-28 client's call of a tool its upstream lists in that era only (or of an upstream that
        runs the tasks it asks for itself), relayed in that era (``UpstreamRequests.forward``), admitted and
        audited like every call; None for any other call."""
        view = self._view(ctx)
        try:
            route, _ = await self._calls.route(request, view)
        except ToolmeshError:  # not there, or held: the usual path says so, after a requestState's checks
            return None
        server = self._feed.catalog.server(route.server.id)
        if server is None:
            return None
        described = view.offer(server).description
        if not (described.reached_in_modern_era("tools/call", {"name": route.tool}) or passed_through(ctx, described)):
            return None
        call = CallSubject.seen_in(view, caller, server, route.tool, request.arguments, "mcp")
        return await forward_call(self._calls, self.upstream, ctx, server, call, request.timeout_seconds)

    def _task_call(self, ctx: Ctx, server_id: str, tool: str, arguments: dict[str, Any]) -> TaskCall:
        """A task's tool call, as the request's caller makes it in its view (``tasks.CallFactory``)."""
        caller, view = self._caller(ctx), self._view(ctx)
        timeout = min(self._settings.task_ttl_seconds, TASK_CALL_MAX_SECONDS)
        request = ToolCallRequest(name=tool, arguments=arguments, server_id=server_id, timeout_seconds=timeout)

        async def call(link: ClientLink) -> dict[str, Any]:
            body = await self._calls.call(request, caller, client=link.ref, view=view, surface="mcp")
            return listing.call_result(body).model_dump(by_alias=True, mode="json", exclude_none=True)

        return call

    async def _call_meta(
        self, ctx: Ctx, name: str, arguments: dict[str, Any]
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult | dict[str, Any]:
        if name == listing.SEARCH_TOOLS:
            return await self._search_mode.search_tools(self._view(ctx), arguments)
        if name == listing.CALL_TOOL:
            request = _call_request(str(arguments.get("name", "")), arguments.get("arguments") or {})
            return await self._call(ctx, request)
        if name == listing.RUN:
            return await self._search_mode.run(self._view(ctx), self._caller(ctx), arguments)
        known = ", ".join(t.name for t in listing.META_TOOLS)
        return listing.text_result(f"Unknown tool {name!r} in search mode; tools: {known}", is_error=True)


def _scope_of(ctx: Ctx) -> dict[str, Any]:
    scope = getattr(ctx.request, "scope", None)
    return scope if isinstance(scope, dict) else {}


def _call_request(name: str, arguments: dict[str, Any], server_id: str | None = None) -> ToolCallRequest:
    return ToolCallRequest(name=name, arguments=arguments, server_id=server_id, timeout_seconds=None)
