"""``/mcp/{server_name}``: one registered server served unchanged.

Original names, the upstream's own protocol version, capabilities, server info and instructions
(recorded when its session opened; the instructions as last approved, ``toolmesh.pinning``): what
the client sees is what the upstream offers. Requests
are forwarded as they are to the session-worker owning the upstream; ``resources/subscribe`` and
``logging/setLevel`` go through the owner's reference counting (one upstream subscription however
many clients), and server → client traffic reaches the client like on ``/mcp``. Bearer auth is
the REST API's; the server is looked up in the caller's namespace (the owner's: ``?namespace=``).
Tool-definition pinning applies here too: the upstream's live ``tools/list`` is compared with the
pins before it is shown, and only the approved, pinned definitions are listed; a live definition
discovery has not recorded (a change the upstream did not announce, a tool never listed) is left
out and the server's tools are discovered again, so the change is held on every surface.
``tools/call`` forwards only a pinned, approved tool (else ``TOOL_NOT_FOUND`` or ``TOOL_CHANGED``,
and the upstream never hears of it); every call is audited. Prompts likewise: ``prompts/list`` shows
only pinned, approved prompts, and ``prompts/get`` reaches the upstream only for one of them (else
``PROMPT_NOT_FOUND`` or ``PROMPT_CHANGED``), and a held resource template is neither listed, read nor
subscribed to (``RESOURCE_CHANGED``). A tool the upstream lets run as a task runs as one
for a 2026-07-28 client that declares the Tasks extension (``tasks``), whatever the upstream speaks,
unless the upstream runs tasks itself (``upstream_tasks``).
"""

from __future__ import annotations

import contextvars
import logging
import time
from typing import Any

import anyio
import mcp_types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult
from mcp.server.lowlevel import Server
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS
from starlette.types import Receive, Scope, Send

from toolmesh.contracts.rpc import RefreshRpc, SetLevelRpc, SubscribeRpc
from toolmesh.errors import PromptNotFound, ServerNotFound, ToolmeshError, ToolNotFound
from toolmesh.pinning import prompt_definition_hash, screen, wire_definition_hash
from toolmesh_gateway import lookup
from toolmesh_gateway.admission import SHED
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.catalog import CatalogServer
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.front_door.client_links import ClientLinks, Ctx, release_if_deleted
from toolmesh_gateway.front_door.eras import CACHE_HINTS, for_client, list_changes
from toolmesh_gateway.front_door.forwarded_calls import forward_call
from toolmesh_gateway.front_door.held_reads import refuse_held_read
from toolmesh_gateway.front_door.listing import error_result
from toolmesh_gateway.front_door.rpc_errors import mcp_error
from toolmesh_gateway.front_door.sessions import as_user, refuse, request_caller
from toolmesh_gateway.front_door.shared_sessions import Announceable, SharedSessions
from toolmesh_gateway.front_door.task_extension import runs_as_task
from toolmesh_gateway.front_door.task_status import TaskFeed, TaskListen
from toolmesh_gateway.front_door.tasks import Tasks
from toolmesh_gateway.front_door.upstream_requests import UpstreamRequests, upstream_params
from toolmesh_gateway.front_door.upstream_tasks import passed_through
from toolmesh_gateway.offers import unflagged_templates
from toolmesh_gateway.policies.checks import CallSubject
from toolmesh_gateway.routing import require_pinned
from toolmesh_gateway.tool_calls import ToolCalls

SERVER_KEY = "toolmesh.server_id"
ANNOUNCE_TIMEOUT_SECONDS = 2.0
MAX_TRACKED_SESSIONS = 10_000
CACHE_HINTS_OF_DISCOVER = {"ttlMs": 0, "cacheScope": "private"}
"""``server/discover`` is answered here, before the SDK would add its hints (``eras.CACHE_HINTS``)."""
MAX_REDISCOVERED = 10_000
Lists = tuple[tuple[str, ...], tuple[tuple[str, ...], tuple[str, ...]], tuple[str, ...]]
"""Tool names, (resource URIs, templates), prompt names of one server: what ``list_changed`` is about."""
log = logging.getLogger("toolmesh.gateway.mcp")
_SERVED: contextvars.ContextVar[str | None] = contextvars.ContextVar("toolmesh_transparent_server", default=None)
"""The id of the server the request being served is for (the SDK's header check asks by tool name only)."""
FORWARDED = ("resources/list", "resources/templates/list", "resources/read", "completion/complete")


class Transparent:
    """The ASGI app and MCP server behind ``/mcp/{server_name}``; its ``manager`` runs with the front door's."""

    def __init__(
        self,
        feed: CatalogFeed,
        calls: ToolCalls,
        forwarder: Forwarder,
        links: ClientLinks,
        upstream: UpstreamRequests,
        sessions: SharedSessions,
        tasks: Tasks,
        task_feed: TaskFeed,
    ) -> None:
        self._feed = feed
        self._calls = calls
        self._forwarder = forwarder
        self._links = links
        self._upstream = upstream
        self._tasks = tasks
        self._task_feed = task_feed
        self.server: Server[Any] = Server(
            "toolmesh-transparent", cache_hints=CACHE_HINTS, get_tool_input_schema=self._input_schema
        )
        self.server.middleware[:] = [self._describe]  # no per-message SDK span: the HTTP and NATS hops have theirs
        for method in FORWARDED:
            self.server.add_request_handler(method, mcp_types.RequestParams, self._forward)
        self.server.add_request_handler("tools/list", mcp_types.RequestParams, self._list_tools)
        self.server.add_request_handler("tools/call", mcp_types.RequestParams, self._call_tool)
        self.server.add_request_handler("prompts/list", mcp_types.RequestParams, self._list_prompts)
        self.server.add_request_handler("prompts/get", mcp_types.RequestParams, self._get_prompt)
        self.server.add_request_handler("resources/subscribe", mcp_types.RequestParams, self._subscribe)
        self.server.add_request_handler("resources/unsubscribe", mcp_types.RequestParams, self._unsubscribe)
        self.server.add_request_handler("logging/setLevel", mcp_types.RequestParams, self._set_level)
        self.server.add_notification_handler("notifications/initialized", mcp_types.NotificationParams, self._track)
        self.server.add_request_handler(
            "subscriptions/listen", mcp_types.SubscriptionsListenRequestParams, self._listen
        )
        tasks.install(self.server)
        self._listeners: dict[str, tuple[InMemorySubscriptionBus, TaskListen, Lists]] = {}
        """Per server with 2026-07-28 listen streams: their bus, its handler, the lists they last heard of."""
        self.manager = sessions.manager(self.server, self._adopted)
        self._sessions: dict[str, tuple[str, Announceable, Lists]] = {}  # session id -> server id, session, lists
        self._rediscovered: dict[str, frozenset[tuple[str, str]]] = {}  # "server id/kind" -> live definitions reported

    async def serve(self, scope: Scope, receive: Receive, send: Send, caller: Caller, name: str) -> None:
        """Find the server named in the path among the caller's and hand the request to the session manager."""
        server = lookup.server_by_name(self._feed.catalog.view(caller.scope), name)
        if server is None:
            await refuse(ServerNotFound(f"Server not found: {name}", {"server_name": name}), scope, receive, send)
            return
        served = _SERVED.set(server.id)
        try:
            await self.manager.handle_request(as_user(scope, caller, **{SERVER_KEY: server.id}), receive, send)
        finally:
            _SERVED.reset(served)
        await release_if_deleted(scope, self._links, self._forwarder, self._feed)

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """The recorded input schema of the served server's tool ``name``: what the SDK checks a
        2026-07-28 call's ``Mcp-Param-*`` headers against (rather than asking the upstream for its list)."""
        served = _SERVED.get()
        tool = self._feed.catalog.tool(served, name) if served is not None else None
        return tool.input_schema if tool is not None else None

    def _lists(self, server_id: str) -> Lists:
        catalog = self._feed.catalog
        offer = catalog.offer(server_id)
        tools = tuple(t.name for t in catalog.tools_of(server_id))
        return tools, (tuple(sorted(offer.resources)), tuple(sorted(offer.templates))), tuple(sorted(offer.prompts))

    async def _track(self, ctx: Ctx, _: mcp_types.NotificationParams) -> None:
        """Remember a session to tell it when its server's lists change."""
        server = self._server(ctx)
        headers = getattr(ctx.request, "headers", None)
        key = (headers.get("mcp-session-id") if headers is not None else None) or str(id(ctx.session))
        self._remember(key, server.id, ctx.session)

    def _adopted(self, session_id: str, connection: Connection, scope: Scope) -> None:
        """Tell a session opened on another replica, now served here too, when its server's lists change."""
        self._remember(session_id, str(scope.get(SERVER_KEY)), connection)

    def _remember(self, key: str, server_id: str, session: Announceable) -> None:
        self._sessions[key] = (server_id, session, self._lists(server_id))
        while len(self._sessions) > MAX_TRACKED_SESSIONS:  # closed sessions are only noticed on a send
            self._sessions.pop(next(iter(self._sessions)))

    async def _listen(
        self, ctx: Ctx, params: mcp_types.SubscriptionsListenRequestParams
    ) -> mcp_types.SubscriptionsListenResult:
        """A 2026-07-28 ``subscriptions/listen`` stream of the server's list changes (any replica's
        catalog follows them, so the stream may be held by any replica)."""
        server = self._server(ctx)
        found = self._listeners.get(server.id)
        if found is None:
            bus = InMemorySubscriptionBus()
            found = self._listeners[server.id] = (
                bus,
                TaskListen(bus, self._task_feed, self._tasks.revive),
                self._lists(server.id),
            )
        return await found[1](ctx, params)

    async def _tell_listeners(self) -> None:
        """Publish each server's list changes since its listen streams last heard."""
        for server_id, (bus, handler, seen) in list(self._listeners.items()):
            now = self._lists(server_id)
            if now == seen:
                continue
            self._listeners[server_id] = (bus, handler, now)
            for event in list_changes(now[0] != seen[0], now[1] != seen[1], now[2] != seen[2]):
                await bus.publish(event)

    async def announce(self) -> None:
        """Send ``list_changed`` for each list of a session's server that changed since it last heard
        (and to the server's 2026-07-28 listen streams)."""
        await self._tell_listeners()
        for key, (server_id, session, seen) in list(self._sessions.items()):
            now = self._lists(server_id)
            if now == seen:
                continue
            self._sessions[key] = (server_id, session, now)
            try:
                with anyio.fail_after(ANNOUNCE_TIMEOUT_SECONDS):
                    if now[0] != seen[0]:
                        await session.send_tool_list_changed()
                    if now[1] != seen[1]:
                        await session.send_resource_list_changed()
                    if now[2] != seen[2]:
                        await session.send_prompt_list_changed()
            except Exception as exc:  # the client went away: forget it
                log.debug("dropping MCP session %s: %s", key, exc)
                self._sessions.pop(key, None)

    def _server(self, ctx: Ctx) -> CatalogServer:
        scope = getattr(ctx.request, "scope", None) or {}
        server = self._feed.catalog.server(str(scope.get(SERVER_KEY)))
        if server is None:
            raise MCPError(code=mcp_types.INVALID_REQUEST, message="This server is no longer registered")
        return server

    async def _describe(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        """``initialize`` (and ``server/discover``) answered with what the upstream said about itself;
        a 2026-07-28 request has no ``initialize`` (the SDK's answer: method not found, 404)."""
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if ctx.method not in ("initialize", "server/discover") or (modern and ctx.method == "initialize"):
            return await call_next(ctx)
        server = self._server(ctx)
        described = self._feed.catalog.offer(server.id).description
        if described.protocol_version is None:
            raise MCPError(code=mcp_types.INTERNAL_ERROR, message=f"{server.name} has not connected yet")
        if ctx.method == "server/discover":
            extensions = {**(described.capabilities.get("extensions") or {}), **self.server.extensions}
            result: dict[str, Any] = {
                "resultType": "complete",
                **CACHE_HINTS_OF_DISCOVER,
                "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
                "capabilities": {**described.capabilities, "extensions": extensions},
                "_meta": {mcp_types.SERVER_INFO_META_KEY: described.server_info},
            }
        else:
            requested = str((ctx.params or {}).get("protocolVersion", ""))
            version = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
            result = {
                "protocolVersion": version,
                "capabilities": described.capabilities,
                "serverInfo": described.server_info,
            }
        if described.served_instructions is not None:
            result["instructions"] = described.served_instructions
        return result

    async def _forward(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        server = self._server(ctx)
        if ctx.method == "resources/read":  # held resource templates are neither read nor listed
            await refuse_held_read(self._feed, server, str((ctx.params or {}).get("uri", "")))
        forwarded = await self._upstream.forward(ctx, server, ctx.method, upstream_params(ctx))
        if ctx.method != "resources/templates/list":
            return forwarded
        return unflagged_templates(forwarded, self._feed.catalog.offer(server.id).template_approvals)

    async def _list_tools(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        """The upstream's own tools/list, with only the tools whose live definition is pinned and approved."""
        server = self._server(ctx)
        listed = await self._upstream.forward(ctx, server, "tools/list", upstream_params(ctx))
        tools = [t for t in listed.get("tools") or () if isinstance(t, dict)]
        live = [(str(t.get("name")), wire_definition_hash(t)) for t in tools]
        screened = screen(live, {t.name: t.pin for t in self._feed.catalog.tools_of(server.id)})
        listed["tools"] = [t for t, pair in zip(tools, live, strict=True) if pair in screened.shown]
        if screened.unrecorded:
            await self._rediscover(server, screened.unrecorded, "tool")
        return listed

    async def _list_prompts(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        """The upstream's own prompts/list, with only the prompts whose live definition is pinned and approved."""
        server = self._server(ctx)
        listed = await self._upstream.forward(ctx, server, "prompts/list", upstream_params(ctx))
        prompts = [p for p in listed.get("prompts") or () if isinstance(p, dict)]
        live = [(str(p.get("name")), prompt_definition_hash(p)) for p in prompts]
        screened = screen(live, self._feed.catalog.offer(server.id).prompt_pins or {})
        listed["prompts"] = [p for p, pair in zip(prompts, live, strict=True) if pair in screened.shown]
        if screened.unrecorded:
            await self._rediscover(server, screened.unrecorded, "prompt")
        return listed

    async def _get_prompt(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        """prompts/get forwarded as it is, only for a pinned, approved prompt (a miss is checked again
        once the catalog caught up with the stream)."""
        server = self._server(ctx)
        name = str((ctx.params or {}).get("name", ""))
        view = self._feed.catalog.view(server.namespace)
        try:
            if name not in view.offer(server).prompts and not (
                await self._feed.catch_up() and name in view.offer(server).prompts
            ):
                lookup.refuse_held_prompt(view, server, name)
                raise PromptNotFound(f"Prompt {name} not found on {server.name}", {"prompt": name})
        except ToolmeshError as exc:
            raise mcp_error(exc) from exc
        return await self._upstream.forward(ctx, server, "prompts/get", upstream_params(ctx))

    async def _rediscover(self, server: CatalogServer, unrecorded: frozenset[tuple[str, str]], kind: str) -> None:
        """Ask the owner to list the server's tools and prompts again (once per set of live ``kind``
        definitions), so pinning holds what the upstream changed without announcing it."""
        key = f"{server.id}/{kind}"
        if self._rediscovered.get(key) == unrecorded:
            return
        self._rediscovered[key] = unrecorded
        while len(self._rediscovered) > MAX_REDISCOVERED:
            self._rediscovered.pop(next(iter(self._rediscovered)))
        log.warning(
            "live %s definitions of %s differ from the pinned ones: %s",
            kind,
            server.name,
            ", ".join(sorted(name for name, _ in unrecorded)),
            extra={"server": server.name},
        )
        try:
            await self._forwarder.control(server, "refresh", RefreshRpc(actor="toolmesh"))
        except ToolmeshError as exc:  # the listing is screened already; the next one asks again
            self._rediscovered.pop(key, None)
            log.warning("rediscovery of %s failed: %s", server.name, exc, extra={"server": server.name})

    async def _call_tool(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        """tools/call forwarded as it is, only to a pinned, approved tool; audited like every call."""
        server = self._server(ctx)
        caller = _caller(ctx)
        tool = str((ctx.params or {}).get("name", ""))
        started = time.perf_counter()
        arguments = dict((ctx.params or {}).get("arguments") or {})  # an object: the SDK checked the params
        try:
            await self._require_pinned(server, tool)
        except ToolmeshError as refused:
            self._calls.record(caller, server, tool, started, "failed", refused.error_code)
            return for_client(ctx, error_result(refused).model_dump(by_alias=True, mode="json", exclude_none=True))
        found = self._feed.catalog.tool(server.id, tool)
        passed = passed_through(ctx, self._feed.catalog.offer(server.id).description)  # the upstream runs it
        if runs_as_task(ctx, found) and found is not None and not passed:  # admitted, run, audited by the task's call
            return await self._tasks.start(ctx, server.id, found, dict(arguments))
        try:
            return await forward_call(
                self._calls, self._upstream, ctx, server, CallSubject(caller, server, tool, arguments, "mcp"), None
            )
        except SHED as refused:  # a refusal of the gateway's capacity: a JSON-RPC error
            raise mcp_error(refused) from refused
        except ToolmeshError as refused:  # a policy's or the namespace's rate: a tool error result
            return for_client(ctx, error_result(refused).model_dump(by_alias=True, mode="json", exclude_none=True))

    async def _require_pinned(self, server: CatalogServer, tool: str) -> None:
        """``ToolNotFound`` or ``ToolChanged`` unless ``tool`` is pinned and approved (a miss is
        checked again once the catalog caught up with the stream)."""
        view = self._feed.catalog.view(server.namespace)
        try:
            require_pinned(view, server, tool)
        except ToolNotFound:
            if not await self._feed.catch_up():
                raise
            require_pinned(view, server, tool)

    async def _subscribe(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        """``resources/subscribe``, refused like a read when only a held template matches the URI."""
        await refuse_held_read(self._feed, self._server(ctx), str((ctx.params or {}).get("uri", "")))
        return await self._control(ctx, "subscribe")

    async def _unsubscribe(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        return await self._control(ctx, "unsubscribe")

    async def _set_level(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        return await self._control(ctx, "set_level")

    async def _control(self, ctx: Ctx, verb: str) -> dict[str, Any]:
        server = self._server(ctx)
        link = self._links.link(ctx)
        link.servers.add(server.id)
        params = ctx.params or {}
        principal = _caller(ctx).principal.key_id
        body: SubscribeRpc | SetLevelRpc
        if verb == "set_level":
            link.log_level = str(params.get("level", "info"))
            body = SetLevelRpc(level=link.log_level, client=link.ref, principal=principal)
        else:
            body = SubscribeRpc(uri=str(params.get("uri", "")), client=link.ref, principal=principal)
        try:
            await self._forwarder.control(server, verb, body, request_caller(ctx.request))
        except ToolmeshError as exc:
            raise mcp_error(exc, ctx.session.client_capabilities) from exc
        return for_client(ctx, {})


def _caller(ctx: Ctx) -> Caller:
    caller = request_caller(ctx.request)
    if caller is None:
        raise MCPError(code=mcp_types.INVALID_REQUEST, message="request without an authenticated caller")
    return caller
