"""Answers to ``toolmesh.rpc.<server_id>.<verb>`` for a server this worker owns."""

from __future__ import annotations

import logging
import time
from typing import Any

from nats.aio.msg import Msg

from toolmesh.contracts.rpc import (
    CallToolRpc,
    DisconnectRpc,
    DisconnectRpcResult,
    PingRpc,
    RpcReply,
)
from toolmesh.errors import ExecutionTimeout, RoutingFailed, ServerUnavailable, ToolmeshError
from toolmesh.lifecycle import SERVING, ServerStatus
from toolmesh.telemetry import adopt_trace
from toolmesh_session_worker.owned import OwnedServer
from toolmesh_session_worker.upstream import UpstreamError, UpstreamSession, UpstreamTimeout

log = logging.getLogger("toolmesh.session")


def _live_session(server: OwnedServer) -> UpstreamSession:
    session = server.session
    if session is None or not session.alive or server.draining or server.status not in SERVING:
        raise ServerUnavailable(
            f"Server unavailable: {server.name}",
            server={"id": server.server_id, "name": server.name, "status": str(server.status)},
        )
    return session


async def _call(server: OwnedServer, body: CallToolRpc) -> dict[str, Any]:
    session = _live_session(server)
    started = time.perf_counter()
    try:
        result = await session.call_tool(body.tool, body.arguments, timeout=body.timeout_seconds)
    except UpstreamTimeout as exc:
        raise ExecutionTimeout(
            f"Tool {server.name}.{body.tool} timed out after {body.timeout_seconds:g}s; the call was cancelled",
            {"server": server.name, "tool": body.tool, "timeout_seconds": body.timeout_seconds},
        ) from exc
    except UpstreamError as exc:
        raise ServerUnavailable(
            f"Server unavailable: {server.name}: {exc}",
            {"in_progress": {"tool": body.tool, "arguments": sorted(body.arguments)}},
            server={"id": server.server_id, "name": server.name, "status": str(server.status)},
        ) from exc
    finally:
        log.info(
            "tool call",
            extra={
                "span": "proxy.tool.call",
                "server": server.name,
                "tool": body.tool,
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            },
        )
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _ping(server: OwnedServer, body: PingRpc) -> dict[str, Any]:
    session = _live_session(server)
    started = time.perf_counter()
    try:
        await session.ping(timeout=body.timeout_seconds)
    except UpstreamError as exc:
        raise ServerUnavailable(f"Ping of {server.name} failed: {exc}") from exc
    return {"response_time_ms": (time.perf_counter() - started) * 1000}


async def _refresh(server: OwnedServer) -> dict[str, Any]:
    _live_session(server)
    server.tasks.spawn(_discover_logged(server))
    return {"status": "REFRESHING"}


async def _discover_logged(server: OwnedServer) -> None:
    try:
        await server.discover()
    except UpstreamError as exc:
        log.warning("tool discovery failed: %s", exc, extra={"server": server.name})


async def _disconnect(server: OwnedServer, body: DisconnectRpc, drain_timeout: float) -> dict[str, Any]:
    pending = server.pending
    server.draining = True
    if pending and not body.force:
        server.tasks.spawn(_drain_then_close(server, drain_timeout))
        return DisconnectRpcResult(status="DISCONNECTING", pending_requests=pending).model_dump()
    seq = await server.set_status(ServerStatus.DISCONNECTED, "DISCONNECTED", force=body.force, cancelled=pending)
    server.tasks.spawn(server.release())
    return DisconnectRpcResult(status=ServerStatus.DISCONNECTED, pending_requests=pending, seq=seq).model_dump()


async def _drain_then_close(server: OwnedServer, timeout: float) -> None:
    await server.drain(timeout)
    await server.set_status(ServerStatus.DISCONNECTED, "DISCONNECTED", abandoned=server.pending)
    await server.release()


async def answer(server: OwnedServer, msg: Msg, drain_timeout: float) -> None:
    """Handle one request message and reply with an ``RpcReply``."""
    adopt_trace(msg.headers)
    verb = msg.subject.rsplit(".", 1)[-1]
    try:
        if verb == "call":
            result = await _call(server, CallToolRpc.model_validate_json(msg.data))
        elif verb == "ping":
            result = await _ping(server, PingRpc.model_validate_json(msg.data))
        elif verb == "refresh":
            result = await _refresh(server)
        elif verb == "disconnect":
            result = await _disconnect(server, DisconnectRpc.model_validate_json(msg.data), drain_timeout)
        else:
            raise RoutingFailed(f"Unknown request verb: {verb}")
        reply = RpcReply(ok=True, result=result)
    except ToolmeshError as exc:
        reply = RpcReply(ok=False, error=exc.body())
    await msg.respond(reply.model_dump_json().encode())
