"""Tool execution: resolve the route in memory, check the server, ask its owner, map the outcome.

The hot path touches no database: routes come from the event-fed ``Catalog``, the call is one
NATS request/reply to the session-worker holding the server (handed over directly when that
worker runs in this process: ``bus.local_first``). Nothing here speaks HTTP; a caller
that can go away passes ``abandoned``, an awaitable that completes when it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext

from toolmesh.contracts.namespace_events import CallRecord
from toolmesh.contracts.rpc import (
    CallToolRpc,
    CancelCallRpc,
    ClientRef,
)
from toolmesh.contracts.tools import ToolCallRequest
from toolmesh.errors import (
    ExecutionTimeout,
    ServerNotFound,
    ServerUnavailable,
    ToolmeshError,
    ToolNotFound,
    UpstreamAuthorizationRequired,
)
from toolmesh.platform.bus.fencing import Fences
from toolmesh.platform.bus.interface import Bus
from toolmesh.platform.bus.requests import request_owner, tell_owner
from toolmesh.platform.config import Settings
from toolmesh.platform.loop_lag import LoopLag
from toolmesh.platform.metrics import record_execution, record_routing
from toolmesh_gateway.admission import Admission
from toolmesh_gateway.approval_requests import ApprovalGate
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.call_audit import CallAudit
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.policies.checks import PASSED, CallPolicies, CallSubject, Verdict, refusal
from toolmesh_gateway.policies.result_fields import redact_result
from toolmesh_gateway.progress_relay import ProgressSink, relaying_progress
from toolmesh_gateway.quota_meter import QuotaMeter, Standing
from toolmesh_gateway.rate_limit import NamespaceCallLimiter
from toolmesh_gateway.result_screen import ResultScreen
from toolmesh_gateway.routing import Route, ServerRoute, resolve_route, serving_warning
from toolmesh_gateway.session_recovery import SessionRecovery

log = logging.getLogger("toolmesh.gateway.calls")
REPLY_GRACE_SECONDS = 2.0
"""How much longer than the call's own timeout the gateway waits for the owner's reply."""
_MISSES = (ServerNotFound, ToolNotFound, ServerUnavailable)


class CallAbandoned(Exception):
    """The caller went away; the call was cancelled upstream."""


Abandoned = Callable[[], Awaitable[object]]
StandingSink = Callable[[Standing], None]
T = TypeVar("T")
MAX_EXCHANGES = 2
"""Token exchanges in one call at most: one for a caller without a grant, one more for the wider scope
an upstream's insufficient_scope challenge then wants (step-up)."""


class AuthorizationLinks(Protocol):
    """Obtains or starts the authorization a caller of a per-user server lacks (``upstream_oauth``)."""

    async def exchange(self, needed: UpstreamAuthorizationRequired, caller: Caller) -> bool:
        """Whether ``caller``'s own token was exchanged for its upstream grant (RFC 8693)."""
        ...

    async def link(self, needed: UpstreamAuthorizationRequired, caller: Caller) -> UpstreamAuthorizationRequired:
        """``needed`` with the URL ``caller`` authorizes at."""
        ...


@dataclass(frozen=True)
class _Hooks:
    """How one caller takes part in its call: when it leaves, where progress goes, which MCP client
    session it is (for server -> client requests) and the call's id."""

    abandoned: Abandoned | None
    progress: ProgressSink | None
    client: ClientRef | None
    call_id: str | None


class ToolCalls:
    """``POST /api/v1/tools/call`` without HTTP; every call is audited (``CallAudit``)."""

    def __init__(
        self,
        bus: Bus,
        js: JetStreamContext,
        feed: CatalogFeed,
        settings: Settings,
        audit: CallAudit,
        links: AuthorizationLinks,
        lag: LoopLag,
        quotas: QuotaMeter,
        gate: ApprovalGate,
    ) -> None:
        self._bus = bus
        self.quotas = quotas
        self._links = links
        self._js = js
        self._feed = feed
        self._audit = audit
        self.results = ResultScreen(audit, enabled=settings.scan_results)
        """Scans results off the call path; records the calls that have one (``result_screen``)."""
        self._default_timeout = settings.request_timeout_seconds
        self._namespace_calls = NamespaceCallLimiter(settings)
        self.admission = Admission(settings, lag)
        """The bound on this process's tool calls in flight (every surface takes its slots)."""
        # Call ids: unique per gateway process and cheap (no urandom syscall per call).
        self._call_prefix = secrets.token_hex(6)
        self.replica = self._call_prefix  # names this gateway process on the client bus
        self._call_numbers = itertools.count(1)
        self.fences = Fences(js)  # refuses the late replies of deposed owners (bus.fencing)
        self.sessions = SessionRecovery(bus, js)
        """Asks for a session of a server nobody holds one for (``session_recovery``)."""
        self.policies = CallPolicies(feed.policies, feed.catalog, gate)
        """The policy check of every call, on every surface, before ``admit`` (``policies.checks``)."""

    async def route(self, request: ToolCallRequest, view: CatalogView) -> tuple[Route, str | None]:
        """The route among what ``view`` shows and its warning; on a miss, once more after the catalog
        caught up with the stream."""
        try:
            route = resolve_route(view, request.name, request.server_id)
            return route, serving_warning(route.server)
        except _MISSES:
            if not await self._feed.catch_up():
                raise
        route = resolve_route(view, request.name, request.server_id)
        return route, serving_warning(route.server)

    def new_call_id(self) -> str:
        """A call id unique in this gateway process (names a call for ``cancel`` and progress)."""
        return f"{self._call_prefix}-{next(self._call_numbers)}"

    async def call(
        self,
        request: ToolCallRequest,
        caller: Caller,
        abandoned: Abandoned | None = None,
        progress: ProgressSink | None = None,
        client: ClientRef | None = None,
        call_id: str | None = None,
        view: CatalogView | None = None,
        surface: str = "rest",
        standing: StandingSink | None = None,
    ) -> dict[str, Any]:
        """The response body of a call: the upstream result (``isError`` forwarded) plus ``metadata``.

        The caller sees only its namespace's servers. With ``progress``, every progress notification
        of the upstream is passed to it during the call; ``client`` is the MCP client session making it
        (server → client requests reach it); ``view`` narrows what it may call (an endpoint's bundle);
        ``surface`` (rest, mcp, nats, code) is where the call came from, as policies see it; ``standing``
        hears where it left its tightest quota (``X-RateLimit-*``)."""
        started = time.perf_counter()
        route, warning = await self.route(request, view or self._feed.catalog.view(caller.scope))
        verdict = PASSED
        try:
            subject = CallSubject.seen_in(view, caller, route.server, route.tool, request.arguments, surface)
            verdict = await self.policies.check(replace(subject, client=client))
            if (left := await self.admit(caller, route.server)) is not None and standing is not None:
                standing(left)
            hooks = _Hooks(abandoned, progress, client, call_id)
            async with self.slot(caller, request.timeout_seconds):
                response = await self.authorized(
                    caller, lambda: self._call_routed(request, route, warning, started, hooks, caller)
                )
        except ToolmeshError as exc:
            self.record(caller, route.server, route.tool, started, "failed", exc.error_code, refusal(exc, verdict))
            raise
        except (CallAbandoned, asyncio.CancelledError):
            self.record(caller, route.server, route.tool, started, "failed", "CANCELLED", verdict)
            raise
        outcome = "tool_error" if response["isError"] else "ok"
        self.record(caller, route.server, route.tool, started, outcome, None, verdict, result=response)
        return redact_result(response, verdict.redact)

    async def authorized(self, caller: Caller, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``; when its server needs the caller's own upstream authorization, once more after
        each exchange of the caller's token for it (RFC 8693; ``MAX_EXCHANGES``), else
        ``UpstreamAuthorizationRequired`` with the URL at which the caller authorizes."""
        exchanges = 0
        while True:
            try:
                return await attempt()
            except UpstreamAuthorizationRequired as exc:
                needed = exc
            if exchanges == MAX_EXCHANGES or not await self._links.exchange(needed, caller):
                raise await self._links.link(needed, caller)
            exchanges += 1

    async def admit(self, caller: Caller, server: ServerRoute) -> Standing | None:
        """Count one call of ``caller`` to ``server``: ``RateLimited`` past its namespace's calls per second
        (fair share) or past a durable quota (``quota_meter``); where it left its tightest quota."""
        self._namespace_calls.check(server.namespace)
        principal = caller.principal
        return await self.quotas.admit((principal.namespace, principal.name), server.namespace, server.name)

    def slot(self, caller: Caller, timeout: float | None = None) -> contextlib.AbstractAsyncContextManager[None]:
        """One of this process's in-flight call slots for ``caller`` while the block runs, waiting at
        most the call's ``timeout`` for it (``admission.Admission.slot``)."""
        return self.admission.slot(caller.principal.key_id, timeout or self._default_timeout)

    def record(
        self,
        caller: Caller,
        server: ServerRoute,
        tool: str,
        started: float,
        outcome: str,
        error: str | None,
        verdict: Verdict = PASSED,
        *,
        result: dict[str, Any] | None = None,
    ) -> None:
        """Put one call (started at ``perf_counter()`` ``started``) in the audit trail, with the policy
        that acted on it (or would have, in a dry run); with its ``result``, once that was scanned."""
        call = CallRecord(
            server_id=server.id,
            server_name=server.name,
            tool=tool,
            actor=caller.actor,
            ip_address=caller.ip_address,
            outcome=outcome,  # type: ignore[arg-type]
            error_code=error,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            at=datetime.now(UTC),
            policy=verdict.policy,
            policy_effect=verdict.effect,
        )
        if result is None:
            self._audit.record(server.namespace, call)
        else:
            self.results.record(server.namespace, call, result)

    async def _call_routed(
        self,
        request: ToolCallRequest,
        route: Route,
        warning: str | None,
        started: float,
        hooks: _Hooks,
        caller: Caller,
    ) -> dict[str, Any]:
        routed = time.perf_counter()
        abandoned, progress = hooks.abandoned, hooks.progress
        record_routing(routed - started)
        timeout = request.timeout_seconds or self._default_timeout
        body = CallToolRpc(
            tool=route.tool,
            arguments=request.arguments,
            timeout_seconds=timeout,
            call_id=hooks.call_id or self.new_call_id(),
            progress=progress is not None,
            client=hooks.client,
            principal=caller.principal.key_id,
        )
        payload = body.model_dump_json().encode()
        result = await self.sessions.with_session(
            route.server, lambda: self._execute_reporting(route, body, payload, abandoned, progress)
        )
        done = time.perf_counter()
        record_execution(route.server.name, done - routed)
        metadata: dict[str, Any] = {
            "routed_to": route.server.name,
            "server_id": route.server.id,
            "routing_time_ms": round((routed - started) * 1000, 3),
            "execution_time_ms": round((done - routed) * 1000, 3),
            "total_time_ms": round((done - started) * 1000, 3),
        }
        if warning:
            metadata["warning"] = warning
        response: dict[str, Any] = {"content": result.get("content", []), "isError": bool(result.get("isError"))}
        if result.get("structuredContent") is not None:
            response["structuredContent"] = result["structuredContent"]
        response["metadata"] = metadata
        return response

    async def _execute_reporting(
        self,
        route: Route,
        body: CallToolRpc,
        payload: bytes,
        abandoned: Abandoned | None,
        progress: ProgressSink | None,
    ) -> dict[str, Any]:
        """``_execute``, relaying the call's progress while it runs when asked to."""
        async with relaying_progress(self._bus, body.call_id, progress):
            return await self._execute(route, body, payload, abandoned)

    async def _execute(
        self, route: Route, body: CallToolRpc, payload: bytes, abandoned: Abandoned | None
    ) -> dict[str, Any]:
        """One request to the owner; cancels the call upstream when the caller leaves or time runs out."""
        server_id = route.server.id
        timeout = body.timeout_seconds + REPLY_GRACE_SECONDS
        request = request_owner(
            self._bus,
            server_id,
            "call",
            payload,
            timeout=timeout,
            server_name=route.server.name,
            deadline=body.timeout_seconds,
            fences=self.fences,
        )
        try:
            if abandoned is None:
                return await request
            result: dict[str, Any] = await _unless_abandoned(request, abandoned)
            return result
        except NatsTimeout as exc:
            await self._cancel(server_id, body)
            raise ExecutionTimeout(
                f"Tool {route.server.name}.{route.tool} got no answer within {body.timeout_seconds:g}s; "
                "the call was cancelled",
                {"server": route.server.name, "tool": route.tool, "timeout_seconds": body.timeout_seconds},
            ) from exc
        except (CallAbandoned, asyncio.CancelledError):
            await asyncio.shield(self._cancel(server_id, body))
            raise

    async def _cancel(self, server_id: str, body: CallToolRpc) -> None:
        assert body.call_id is not None
        payload = CancelCallRpc(call_id=body.call_id).model_dump_json().encode()
        try:
            await tell_owner(self._bus, server_id, "cancel", payload)
        except Exception as exc:  # best effort: the owner's own timeout still ends the call
            log.warning("could not send cancel for call %s: %s", body.call_id, exc)


async def _unless_abandoned(request: Awaitable[Any], abandoned: Abandoned) -> Any:
    """Await ``request`` unless ``abandoned`` completes first (then ``CallAbandoned``)."""
    work = asyncio.ensure_future(request)
    watch = asyncio.ensure_future(abandoned())
    try:
        await asyncio.wait((work, watch), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
    if work.done() and not work.cancelled():
        return work.result()
    raise CallAbandoned
