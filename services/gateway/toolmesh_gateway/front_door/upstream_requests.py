"""One request of an MCP client to one server's upstream, on the path its era takes.

A 2026-07-28 client's request to an upstream that speaks that era too goes in it when the upstream
offers its target in that era only (``ServerDescription.reached_in_modern_era``; lists always), with
the client's envelope (a ``tools/call`` declaring the Tasks extension too, when the upstream runs tasks
itself: ``upstream_tasks``); the upstream's ``InputRequiredResult`` comes back to the client with its
``requestState`` sealed (``InputBridge.seal_relayed``), and a result's ``cacheScope`` is ``private``
whatever the upstream said (its ``ttlMs`` holds): what a path names depends on the caller's namespace,
and pinning screens the lists, so no answer of toolmesh is one a shared cache may give to another
principal. Any other request goes through the upstream's
handshake session (its server → client requests through the ``InputBridge`` for such a client).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolmesh.contracts.rpc import ClientRef, ToolProgress
from toolmesh.errors import ToolmeshError
from toolmesh_gateway.catalog import CatalogServer
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.front_door.client_links import ClientLink, ClientLinks, Ctx
from toolmesh_gateway.front_door.eras import ENVELOPE, envelope_of, for_client
from toolmesh_gateway.front_door.input_required import BRIDGED, InputBridge, bridged
from toolmesh_gateway.front_door.relayed_questions import screened_answer
from toolmesh_gateway.front_door.rpc_errors import mcp_error
from toolmesh_gateway.front_door.sessions import request_caller
from toolmesh_gateway.front_door.upstream_tasks import UpstreamTasks, passed_through
from toolmesh_gateway.policies.checks import APPROVED, PASSED, Verdict
from toolmesh_gateway.progress_relay import ProgressSink

Screen = Callable[[Callable[[Verdict], Awaitable[dict[str, Any]]], ClientRef], Awaitable[dict[str, Any]]]
"""``screen(forward, client)``: ``forward(verdict)``'s result once the policies let the call of ``client`` go."""
_CLIENT_ONLY_META = ENVELOPE | {"progressToken"}  # toolmesh asks the upstream for progress itself


def progress_sink(ctx: Ctx) -> ProgressSink | None:
    """Forwards upstream progress to the client when its request carried a progress token."""
    meta: Any = ctx.meta or {}
    if not (meta.get("progress_token") or meta.get("progressToken")):
        return None

    async def sink(update: ToolProgress) -> None:
        await ctx.session.report_progress(update.progress, update.total, update.message)

    return sink


def upstream_params(ctx: Ctx, **replace: Any) -> dict[str, Any]:
    """The request's raw params for the upstream, without what belongs to the client's own
    connection (its progress token, the 2026-07-28 envelope)."""
    params = {k: v for k, v in (ctx.params or {}).items() if k not in ("inputResponses", "requestState")}
    meta = {k: v for k, v in (params.get("_meta") or {}).items() if k not in _CLIENT_ONLY_META}
    if meta:
        params["_meta"] = meta
    else:
        params.pop("_meta", None)
    params.update(replace)
    return params


class UpstreamRequests:
    """Sends a client's request to a server's upstream: relayed in the 2026-07-28 era, run in the
    ``InputBridge``, or through the upstream's handshake session."""

    def __init__(
        self,
        view_of: Callable[[Ctx], CatalogView],
        forwarder: Forwarder,
        links: ClientLinks,
        bridge: InputBridge,
        upstream_tasks: UpstreamTasks,
    ) -> None:
        self._view = view_of  # what the connection's caller sees: its namespace
        self._forwarder = forwarder
        self._links = links
        self._bridge = bridge
        self._upstream_tasks = upstream_tasks

    async def forward(
        self, ctx: Ctx, server: CatalogServer, method: str, params: dict[str, Any], verdict: Verdict = PASSED
    ) -> dict[str, Any]:
        """One request to ``server``'s upstream on behalf of this client (its server → client traffic
        comes back on this request's stream, or as an ``InputRequiredResult`` in the 2026-07-28 era);
        ``verdict``: the policies' on a tool call (whether it was approved, which a relayed state tells
        its retry; what the result of a task the upstream runs loses)."""
        described = self._view(ctx).offer(server).description
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if modern and passed_through(ctx, described, method):
            return await self._relay_task(ctx, server, params, verdict)
        if modern and described.reached_in_modern_era(method, params):
            return await self._relay(ctx, server, method, params, verdict=verdict)
        if bridged(ctx):
            return await self.forward_bridged(ctx, server, method, params, lambda forward, _: forward(verdict))
        call_id = self._forwarder.new_call_id()
        with self._links.call(ctx, call_id) as client:
            result = await self._send(ctx, server, method, params, client, call_id)
        return for_client(ctx, result)

    def bridges(self, ctx: Ctx, server: CatalogServer, method: str, params: dict[str, Any]) -> bool:
        """Whether ``forward`` runs this request in the ``InputBridge``: a 2026-07-28 client's request
        that reaches ``server``'s upstream through its handshake session."""
        if not bridged(ctx):
            return False
        described = self._view(ctx).offer(server).description
        return not (passed_through(ctx, described, method) or described.reached_in_modern_era(method, params))

    def screens_in_bridge(self, ctx: Ctx, server: CatalogServer, method: str, params: dict[str, Any]) -> bool:
        """Whether a 2026-07-28 client's request is screened in the ``InputBridge`` (``forward_bridged``),
        so a policy's approval question becomes an input request: one the bridge runs anyway
        (``bridges``), or one relayed in that era that starts a call or resumes one held here; not the
        retry carrying an upstream's own state (its approval, if any, is sealed in that state)."""
        return bridged(ctx) and (self.bridges(ctx, server, method, params) or self._bridge.holds(ctx))

    async def forward_bridged(
        self, ctx: Ctx, server: CatalogServer, method: str, params: dict[str, Any], screen: Screen
    ) -> dict[str, Any]:
        """A request run in the ``InputBridge`` as ``screen(forward, client)`` lets ``forward(verdict)``
        reach the upstream: what ``screen`` asks ``client`` (a policy's approval question) becomes an
        input request answered in the retry, which resumes the parked call (screened once)."""
        handshake = self.bridges(ctx, server, method, params)

        def screened(link: ClientLink) -> Awaitable[dict[str, Any]]:
            async def forward(verdict: Verdict) -> dict[str, Any]:
                if handshake:
                    return await self._send(ctx, server, method, params, link.ref)
                return await self.forward(ctx, server, method, params, verdict)

            return screen(forward, link.ref)

        outcome = await self._bridge.run(ctx, screened)
        if isinstance(outcome, mcp_types.InputRequiredResult):
            return outcome.model_dump(by_alias=True, mode="json", exclude_none=True)
        return for_client(ctx, outcome)

    def approved_before(self, ctx: Ctx, server: CatalogServer) -> bool:
        """Whether this request retries a call to ``server`` that was approved already (its state says so)."""
        return self._bridge.approved_before(ctx, server.id)

    async def _relay_task(
        self, ctx: Ctx, server: CatalogServer, params: dict[str, Any], verdict: Verdict
    ) -> dict[str, Any]:
        """A ``tools/call`` the upstream may run as a task of its own, counted in the caller's task quota."""
        task_id = self._upstream_tasks.reserve(ctx)
        answer: dict[str, Any] = {}
        try:
            answer = await self._relay(ctx, server, "tools/call", params, task_id, verdict)
        finally:
            if answer.get("resultType") != "task":
                self._upstream_tasks.unreserve(task_id)
        return answer

    async def _relay(
        self,
        ctx: Ctx,
        server: CatalogServer,
        method: str,
        params: dict[str, Any],
        task_id: str | None = None,
        verdict: Verdict = PASSED,
    ) -> dict[str, Any]:
        """A 2026-07-28 client's request to an upstream of that era, in that era: the client's own
        ``inputResponses`` and (opened) ``requestState`` with it, an upstream state sealed on the way back."""
        asked = ctx.params or {}
        envelope = envelope_of(ctx)
        params = dict(params)
        if method in BRIDGED:
            if "inputResponses" in asked:
                params["inputResponses"] = asked["inputResponses"]
            if asked.get("requestState") is not None:
                params["requestState"] = await self._bridge.redeem_relayed(ctx, server.id, asked["requestState"])
        call_id = self._forwarder.new_call_id()
        with self._links.call(ctx, call_id) as client:
            result = await self._send(ctx, server, method, params, client, call_id, envelope)
        if result.get("resultType") == "task":  # the upstream runs it as a task
            if task_id is None:
                words = f"the upstream {server.name} answered a task the request did not ask for"
                raise MCPError(code=mcp_types.INTERNAL_ERROR, message=words)
            return await self._upstream_tasks.adopt(ctx, server, task_id, result, verdict.redact)
        screened_answer(ctx, server.name, result)
        state = result.get("requestState")
        if result.get("resultType") == "input_required" and isinstance(state, str):
            result["requestState"] = self._bridge.seal_relayed(ctx, server.id, state, verdict.effect == APPROVED)
        if "cacheScope" in result:  # the upstream's lifetime holds; who may share it is toolmesh's to say
            result["cacheScope"] = "private"
        return for_client(ctx, result)

    async def _send(
        self,
        ctx: Ctx,
        server: CatalogServer,
        method: str,
        params: dict[str, Any],
        client: ClientRef,
        call_id: str | None = None,
        envelope: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        try:
            return await self._forwarder.request(
                server,
                method,
                params,
                client=client,
                progress=progress_sink(ctx),
                call_id=call_id,
                caller=request_caller(ctx.request),
                envelope=envelope,
            )
        except ToolmeshError as exc:
            raise mcp_error(exc, ctx.session.client_capabilities) from exc
