"""Answers to ``toolmesh.rpc.<server_id>.<verb>`` for a server this worker owns."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from mcp_types import CONNECTION_CLOSED

from toolmesh.bus.local_owners import OwnerRequest
from toolmesh.bus.requests import ok_reply
from toolmesh.contracts.rpc import (
    CallToolRpc,
    CancelCallRpc,
    ClientGoneRpc,
    DisconnectRpc,
    DisconnectRpcResult,
    HealthVerdictRpc,
    PingRpc,
    RpcReply,
    SetLevelRpc,
    SubscribeRpc,
    ToolProgress,
    UpstreamRequestRpc,
    progress_subject,
)
from toolmesh.errors import (
    ExecutionFailed,
    ExecutionTimeout,
    LimitExceeded,
    RoutingFailed,
    ServerUnavailable,
    ToolmeshError,
)
from toolmesh.lifecycle import ServerStatus
from toolmesh.payloads import parse_payload
from toolmesh.telemetry import adopt_trace
from toolmesh_session_worker import forwarding
from toolmesh_session_worker.forwarding import live_session as _live_session
from toolmesh_session_worker.owned import OwnedServer
from toolmesh_session_worker.upstream import ProgressCallback, UpstreamError, UpstreamTimeout

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
    nc = server.nc

    async def publish(progress: float, total: float | None, message: str | None) -> None:
        update = ToolProgress(progress=progress, total=total, message=message)
        await nc.publish(subject, update.model_dump_json().encode())

    return publish


async def _call(server: OwnedServer, body: CallToolRpc, progress: ProgressCallback | None = None) -> bytes:
    """Call the tool upstream; the result as the JSON the MCP wire uses, ready to put in the reply."""
    session = _live_session(server)
    started = time.perf_counter()
    if body.call_id:
        server.calls[body.call_id] = asyncio.current_task()  # type: ignore[assignment]
    server.clients.begin(body.call_id, body.client)
    span: dict[str, Any] = {"status": "FAILED"}
    try:
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
        server.clients.end(body.call_id)
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


def _cancel(server: OwnedServer, body: CancelCallRpc) -> dict[str, Any]:
    """Cancel a call in flight; the upstream adapter sends notifications/cancelled."""
    task = server.calls.get(body.call_id)
    if task is not None:
        task.cancel()
    return {"cancelled": task is not None}


async def _health(server: OwnedServer, body: HealthVerdictRpc) -> dict[str, Any]:
    """Apply the health-worker's BR-006 verdict (DEGRADED, RECOVERED, or ERROR and reconnect)."""
    return (await server.apply_verdict(body)).model_dump()


async def _ping(server: OwnedServer, body: PingRpc) -> dict[str, Any]:
    session = _live_session(server)
    started = time.perf_counter()
    try:
        await session.ping(timeout=body.timeout_seconds)
    except UpstreamError as exc:
        raise ServerUnavailable(f"Ping of {server.name} failed: {exc.summary}") from exc
    return {"response_time_ms": (time.perf_counter() - started) * 1000}


async def _refresh(server: OwnedServer) -> dict[str, Any]:
    _live_session(server)
    server.tasks.spawn(_discover_logged(server))
    return {"status": "REFRESHING"}


async def _discover_logged(server: OwnedServer) -> None:
    try:
        await server.discover_all()
    except (UpstreamError, LimitExceeded) as exc:
        log.warning("tool discovery failed: %s", exc, extra={"server": server.name})


async def _disconnect(server: OwnedServer, body: DisconnectRpc, drain_timeout: float) -> dict[str, Any]:
    pending = server.pending
    server.draining = True
    if pending and not body.force:
        server.tasks.spawn(_drain_then_close(server, drain_timeout))
        return DisconnectRpcResult(status="DISCONNECTING", pending_requests=pending).model_dump()
    seq = await server.set_status(ServerStatus.DISCONNECTED, "DISCONNECTED", force=body.force, cancelled=pending)
    await server.release()  # before replying: once the caller hears DISCONNECTED, nobody owns the server
    return DisconnectRpcResult(status=ServerStatus.DISCONNECTED, pending_requests=pending, seq=seq).model_dump()


async def _drain_then_close(server: OwnedServer, timeout: float) -> None:
    await server.drain(timeout)
    await server.set_status(ServerStatus.DISCONNECTED, "DISCONNECTED", abandoned=server.pending)
    await server.release()


REPLY_HEADROOM_BYTES = 4096
"""Room left in a NATS message for its headers and subject."""


def _fitting(server: OwnedServer, reply: bytes, what: str) -> bytes:
    """``reply`` if NATS can carry it (its ``max_payload``); else ``ExecutionFailed`` naming both sizes."""
    limit = server.nc.max_payload - REPLY_HEADROOM_BYTES
    if len(reply) <= limit:
        return reply
    raise ExecutionFailed(
        f"The result of {server.name}.{what} is {len(reply)} bytes, over the {limit} byte limit of a reply",
        {"server": server.name, "tool": what, "result_bytes": len(reply), "limit_bytes": limit},
    )


async def answer(server: OwnedServer, msg: OwnerRequest, drain_timeout: float) -> None:
    """Handle one request message and reply with an ``RpcReply``; a body its verb's model refuses (any
    sender on the bus may send one) is answered with ``VALIDATION_ERROR``."""
    adopt_trace(msg.headers)
    verb = msg.subject.rsplit(".", 1)[-1]
    try:
        if verb == "call":
            body = parse_payload(CallToolRpc, msg.data)
            data = await _call(server, body, _progress_publisher(server, body))
            await msg.respond(_fitting(server, ok_reply(data), body.tool))
            return
        if verb == "request":
            forwarded = parse_payload(UpstreamRequestRpc, msg.data)
            data = await forwarding.forward(server, forwarded, _progress_publisher(server, forwarded))
            await msg.respond(_fitting(server, data, forwarded.method))
            return
        if verb == "subscribe":
            result = await forwarding.subscribe(server, parse_payload(SubscribeRpc, msg.data))
        elif verb == "unsubscribe":
            result = await forwarding.unsubscribe(server, parse_payload(SubscribeRpc, msg.data))
        elif verb == "set_level":
            result = await forwarding.set_level(server, parse_payload(SetLevelRpc, msg.data))
        elif verb == "client_gone":
            result = await forwarding.client_gone(server, parse_payload(ClientGoneRpc, msg.data))
        elif verb == "cancel":
            result = _cancel(server, parse_payload(CancelCallRpc, msg.data))
        elif verb == "health":
            result = await _health(server, parse_payload(HealthVerdictRpc, msg.data))
        elif verb == "ping":
            result = await _ping(server, parse_payload(PingRpc, msg.data))
        elif verb == "refresh":
            result = await _refresh(server)
        elif verb == "disconnect":
            result = await _disconnect(server, parse_payload(DisconnectRpc, msg.data), drain_timeout)
        else:
            raise RoutingFailed(f"Unknown request verb: {verb}")
        reply = RpcReply(ok=True, result=result)
    except ToolmeshError as exc:
        reply = RpcReply(ok=False, error=exc.body())
    if msg.reply:  # a cancel is sent without a reply subject
        await msg.respond(reply.model_dump_json().encode())
