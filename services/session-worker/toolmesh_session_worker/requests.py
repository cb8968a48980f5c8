"""Answers to ``toolmesh.rpc.<server_id>.<verb>`` for a server this worker owns: one handler per verb
of the ``rpc`` family (``bus.verbs``), served by a ``Dispatcher``."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_types import CONNECTION_CLOSED

from toolmesh.contracts.rpc import (
    CallToolRpc,
    CancelCallRpc,
    CancelCallRpcResult,
    DisconnectRpc,
    DisconnectRpcResult,
    HealthVerdictResult,
    HealthVerdictRpc,
    PingRpc,
    PingRpcResult,
    RefreshRpc,
    RefreshRpcResult,
    ToolProgress,
    UpstreamRequestRpc,
    progress_subject,
)
from toolmesh.errors import (
    ExecutionFailed,
    ExecutionTimeout,
    LimitExceeded,
    ServerUnavailable,
)
from toolmesh.lifecycle import ServerStatus
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.dispatch import Dispatcher, Handler, Result
from toolmesh.platform.bus.verbs import Verb
from toolmesh.platform.telemetry import outgoing_headers
from toolmesh_session_worker import forwarding
from toolmesh_session_worker.forwarding import live_session as _live_session
from toolmesh_session_worker.inflight import late
from toolmesh_session_worker.owned import HELD_VERBS, OwnedServer
from toolmesh_session_worker.upstream import (
    ProgressCallback,
    UpstreamError,
    UpstreamRefused,
    UpstreamScopeRequired,
    UpstreamTimeout,
)

log = logging.getLogger("toolmesh.session")


def _failed(exc: BaseException) -> dict[str, Any]:
    """The span fields of a failed call."""
    if isinstance(exc, asyncio.CancelledError):
        return {"status": "FAILED", "errorType": "CancelledError", "errorMessage": "cancelled by the caller"}
    return {"status": "FAILED", "errorType": type(exc).__name__, "errorMessage": str(exc)}


def _progress_publisher(server: OwnedServer, body: CallToolRpc | UpstreamRequestRpc) -> ProgressCallback | None:
    """Publishes the upstream's progress of a call that asked for it on ``progress_subject(call_id)``."""
    if not body.progress or not body.call_id:
        return None
    subject = progress_subject(body.call_id)
    bus = server.bus
    headers = outgoing_headers()  # the call's trace: the upstream's callback may run in another context

    async def publish(progress: float, total: float | None, message: str | None) -> None:
        update = ToolProgress(progress=progress, total=total, message=message)
        await bus.publish(subject, update.model_dump_json().encode(), headers=headers)

    return publish


async def _call(server: OwnedServer, body: CallToolRpc, progress: ProgressCallback | None = None) -> bytes:
    """Call the tool upstream; the result as the JSON the MCP wire uses, ready to put in the reply."""
    session, clients = await forwarding.caller_session(server, body.principal)
    started = time.perf_counter()
    if body.call_id:
        server.calls[body.call_id] = asyncio.current_task()  # type: ignore[assignment]
    clients.begin(body.call_id, body.client)
    span: dict[str, Any] = {"status": "FAILED"}
    try:
        forwarding.require_lease(server)  # right before it executes: never a call this worker may no longer own
        result = await session.call_tool(
            body.tool, body.arguments, timeout=body.timeout_seconds, progress=progress, call_id=body.call_id
        )
        data = result.model_dump_json(by_alias=True, exclude_none=True).encode()
        span = {"status": "SUCCESS", "resultLength": len(data)}
        return data
    except UpstreamTimeout as exc:
        span = _failed(exc)
        raise ExecutionTimeout(
            f"Tool {server.name}.{body.tool} timed out after {body.timeout_seconds:g}s; the call was cancelled",
            {"server": server.name, "tool": body.tool, "timeout_seconds": body.timeout_seconds},
        ) from exc
    except UpstreamScopeRequired as exc:
        span = _failed(exc)
        raise forwarding.scope_refusal(server, exc) from exc
    except UpstreamRefused as exc:
        span = _failed(exc)
        raise await forwarding.grant_refused(server, body.principal, exc) from exc
    except UpstreamError as exc:
        span = _failed(exc)
        if exc.code is not None and exc.code != CONNECTION_CLOSED:
            # The upstream answered with a JSON-RPC error: a protocol failure, not a lost server.
            raise ExecutionFailed(
                f"Tool {server.name}.{body.tool} failed upstream: {exc}",
                {"server": server.name, "tool": body.tool, "upstream_code": exc.code},
            ) from exc
        raise ServerUnavailable(
            f"Server unavailable: {server.name}: {exc.summary}",
            {"in_progress": {"tool": body.tool, "arguments": sorted(body.arguments)}},
            server={"id": server.server_id, "name": server.name, "status": str(server.status)},
        ) from exc
    except BaseException as exc:
        span = _failed(exc)
        raise
    finally:
        clients.end(body.call_id)
        if body.call_id:
            server.calls.pop(body.call_id, None)
        log.info(
            "proxy.tool.call",
            extra={
                "span": "proxy.tool.call",
                "server": server.name,
                "tool": body.tool,
                "resultLength": 0,
                "duration": round((time.perf_counter() - started) * 1000, 3),
                **span,
            },
        )


async def _cancel(server: OwnedServer, body: CancelCallRpc) -> CancelCallRpcResult:
    """Cancel a call in flight; the upstream adapter sends notifications/cancelled."""
    task = server.calls.get(body.call_id)
    if task is not None:
        task.cancel()
    return CancelCallRpcResult(cancelled=task is not None)


async def _health(server: OwnedServer, body: HealthVerdictRpc) -> HealthVerdictResult:
    """Apply the health-worker's BR-006 verdict (DEGRADED, RECOVERED, or ERROR and reconnect)."""
    return await server.apply_verdict(body)


async def _ping(server: OwnedServer, body: PingRpc) -> PingRpcResult:
    session = _live_session(server)
    started = time.perf_counter()
    try:
        await session.ping(timeout=body.timeout_seconds)
    except UpstreamError as exc:
        raise ServerUnavailable(f"Ping of {server.name} failed: {exc.summary}") from exc
    return PingRpcResult(response_time_ms=(time.perf_counter() - started) * 1000)


async def _refresh(server: OwnedServer, body: RefreshRpc) -> RefreshRpcResult:
    _live_session(server)
    server.tasks.spawn(_discover_logged(server))
    return RefreshRpcResult(status="REFRESHING")


async def _discover_logged(server: OwnedServer) -> None:
    try:
        await server.discover_all()
    except (UpstreamError, LimitExceeded) as exc:
        log.warning("tool discovery failed: %s", exc, extra={"server": server.name})


async def _disconnect(server: OwnedServer, body: DisconnectRpc, drain_timeout: float) -> DisconnectRpcResult:
    pending = server.pending
    server.draining = True
    if pending and not body.force:
        server.tasks.spawn(_drain_then_close(server, drain_timeout))
        return DisconnectRpcResult(status="DISCONNECTING", pending_requests=pending)
    seq = await server.set_status(ServerStatus.DISCONNECTED, "DISCONNECTED", force=body.force, cancelled=pending)
    await server.release()  # before replying: once the caller hears DISCONNECTED, nobody owns the server
    return DisconnectRpcResult(status=ServerStatus.DISCONNECTED, pending_requests=pending, seq=seq)


async def _drain_then_close(server: OwnedServer, timeout: float) -> None:
    await server.drain(timeout)
    await server.set_status(ServerStatus.DISCONNECTED, "DISCONNECTED", abandoned=server.pending)
    await server.release()


REPLY_HEADROOM_BYTES = 4096
"""Room left in a NATS message for its headers and subject."""

Act = Callable[[OwnedServer, Any], Awaitable[Result]]
"""What a verb does to the server it is addressed to."""


def _too_large(server: OwnedServer, verb: Verb, body: Any, size: int, limit: int) -> ExecutionFailed:
    """``ExecutionFailed`` naming the server, the tool (or method) and both sizes."""
    what = (
        body.tool
        if isinstance(body, CallToolRpc)
        else body.method
        if isinstance(body, UpstreamRequestRpc)
        else verb.name
    )
    return ExecutionFailed(
        f"The result of {server.name}.{what} is {size} bytes, over the {limit} byte limit of a reply",
        {"server": server.name, "tool": what, "result_bytes": size, "limit_bytes": limit},
    )


def _held(server: OwnedServer, verb: Verb, act: Act, hold_seconds: float) -> Handler:
    """``act`` as a handler; a verb of ``HELD_VERBS`` first waits out a reconnect in progress (EC-010)."""

    async def handle(key: str, body: Any) -> Result:
        forwarding.require_lease(server)  # first: a request buffered while the process was paused
        if verb.name in HELD_VERBS:
            await server.hold_while_reconnecting(hold_seconds)
            if (expired := late(server.server_id)) is not None:  # its caller gave up while it waited
                raise expired
        return await act(server, body)

    return handle


def owner_dispatcher(server: OwnedServer, *, drain_timeout: float, hold_seconds: float) -> Dispatcher:
    """Every ``rpc`` verb the owner of ``server`` answers; a body its verb's model refuses (any sender
    on the bus may send one) is answered with ``VALIDATION_ERROR``."""

    async def call(server: OwnedServer, body: CallToolRpc) -> bytes:
        return await _call(server, body, _progress_publisher(server, body))

    async def forward(server: OwnedServer, body: UpstreamRequestRpc) -> bytes:
        return await forwarding.forward(server, body, _progress_publisher(server, body))

    async def disconnect(server: OwnedServer, body: DisconnectRpc) -> DisconnectRpcResult:
        return await _disconnect(server, body, drain_timeout)

    acts: dict[Verb, Act] = {
        verbs.CALL: call,
        verbs.REQUEST: forward,
        verbs.SUBSCRIBE: forwarding.subscribe,
        verbs.UNSUBSCRIBE: forwarding.unsubscribe,
        verbs.SET_LEVEL: forwarding.set_level,
        verbs.CLIENT_GONE: forwarding.client_gone,
        verbs.CANCEL: _cancel,
        verbs.HEALTH: _health,
        verbs.PING: _ping,
        verbs.REFRESH: _refresh,
        verbs.DISCONNECT: disconnect,
    }
    return Dispatcher(
        verbs.RPC,
        {verb: _held(server, verb, act, hold_seconds) for verb, act in acts.items()},
        span_name="session",
        reply_limit=lambda: server.bus.max_payload - REPLY_HEADROOM_BYTES,
        oversize=functools.partial(_too_large, server),
        fence=lambda: server.fence_token,
    )
