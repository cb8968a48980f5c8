"""The projector's writes: each event applied once, in the same transaction as the checkpoint.

Every timestamp comes from the event, never from the clock, so a replay gives identical rows.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from toolmesh.contracts.events import (
    Event,
    HealthChecked,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    ToolsClassified,
    ToolsDiscovered,
)
from toolmesh.naming import namespace_tool

log = logging.getLogger("toolmesh.projection")
Conn = asyncpg.Connection | PoolConnectionProxy
PROJECTOR = "postgres"
READ_MODEL_TABLES = (
    "mcp.external_servers",
    "mcp.tools",
    "mcp.server_connection_history",
    "mcp.audit_log",
    "mcp.applied_events",
    "mcp.projector_checkpoint",
)


async def apply_event(conn: Conn, event: Event, stream_seq: int) -> bool:
    """Apply one event at ``stream_seq``; False when it had been applied already (a no-op)."""
    async with conn.transaction():
        last = await conn.fetchval(
            "SELECT last_seq FROM mcp.projector_checkpoint WHERE projector = $1 FOR UPDATE", PROJECTOR
        )
        if last is not None and stream_seq <= last:
            return False
        first_time = await conn.fetchval(
            "INSERT INTO mcp.applied_events(event_id, stream_seq) VALUES ($1, $2) "
            "ON CONFLICT (event_id) DO NOTHING RETURNING true",
            event.event_id,
            stream_seq,
        )
        if first_time:
            await _HANDLERS[type(event)](conn, event)
        await record_checkpoint(conn, stream_seq)
        return bool(first_time)


async def record_checkpoint(conn: Conn, stream_seq: int) -> None:
    """Move the checkpoint forward (also for messages with nothing to apply)."""
    await conn.execute(
        "INSERT INTO mcp.projector_checkpoint(projector, last_seq) VALUES ($1, $2) "
        "ON CONFLICT (projector) DO UPDATE SET last_seq = GREATEST(mcp.projector_checkpoint.last_seq, $2)",
        PROJECTOR,
        stream_seq,
    )


async def reset_read_model(conn: Conn) -> None:
    """Empty every projected table (``toolmesh projector --rebuild``); principals are kept."""
    await conn.execute(f"TRUNCATE {', '.join(READ_MODEL_TABLES)} RESTART IDENTITY CASCADE")


async def _audit(conn: Conn, event: Event, name: str | None, details: dict[str, Any]) -> None:
    await conn.execute(
        "INSERT INTO mcp.audit_log(event, event_id, server_id, server_name, actor, ip_address, details, "
        "timestamp) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        event.subject.removeprefix("toolmesh.evt."),
        event.event_id,
        event.server_id,
        name,
        event.actor,
        getattr(event, "ip_address", None),
        details,
        event.occurred_at,
    )


async def _history(conn: Conn, event: Event, kind: str, details: dict[str, Any]) -> None:
    await conn.execute(
        "INSERT INTO mcp.server_connection_history(server_id, event_type, details, timestamp) "
        "SELECT id, $2, $3, $4 FROM mcp.external_servers WHERE id = $1",
        event.server_id,
        kind,
        details,
        event.occurred_at,
    )


async def _server_registered(conn: Conn, event: ServerRegistered) -> None:
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO mcp.external_servers(id, name, description, transport_type, connection_config, "
                "health_check_url, status, registered_at, updated_at) "
                "VALUES ($1, $2, $3, $4, $5, $6, 'DISCONNECTED', $7, $7) ON CONFLICT (id) DO NOTHING",
                event.server_id,
                event.name,
                event.description,
                str(event.transport_type),
                {"sealed": event.sealed_config, "masked": event.masked_config},
                event.health_check_url,
                event.occurred_at,
            )
    except asyncpg.UniqueViolationError:
        # The name was taken by another server id: the KV reservation failed open. The
        # UNIQUE constraint is the backstop; the losing registration is dropped.
        log.error("registration of %s dropped: name already taken", event.name, extra={"server": event.name})
        return
    await _history(conn, event, "REGISTERED", {"actor": event.actor})
    await _audit(conn, event, event.name, {"transport_type": str(event.transport_type)})


async def _status_changed(conn: Conn, event: ServerStatusChanged) -> None:
    name = await conn.fetchval(
        "UPDATE mcp.external_servers SET status = $2::text, "
        "error_message = CASE WHEN $2::text = 'ERROR' THEN $3 WHEN $2::text = 'CONNECTED' THEN NULL "
        "  ELSE error_message END, "
        "connected_at = CASE WHEN $2::text = 'CONNECTED' THEN $4 ELSE connected_at END, "
        "consecutive_failures = CASE WHEN $2::text = 'CONNECTED' THEN 0 ELSE consecutive_failures END, "
        "updated_at = $4 WHERE id = $1 RETURNING name",
        event.server_id,
        str(event.status),
        event.error_message,
        event.occurred_at,
    )
    if name is None:
        return
    details = {"status": str(event.status), "previous_status": event.previous_status, **event.details}
    if event.error_message:
        details["error_message"] = event.error_message
    await _history(conn, event, event.history, details)
    await _audit(conn, event, name, details)


async def _server_removed(conn: Conn, event: ServerRemoved) -> None:
    await conn.execute("DELETE FROM mcp.external_servers WHERE id = $1", event.server_id)
    await _audit(conn, event, event.name, {})


async def _tools_discovered(conn: Conn, event: ToolsDiscovered) -> None:
    exists = await conn.fetchval("SELECT 1 FROM mcp.external_servers WHERE id = $1", event.server_id)
    if not exists:
        return
    names = [namespace_tool(event.server_name, t.original_name) for t in event.tools]
    await conn.execute(
        "DELETE FROM mcp.tools WHERE source_server_id = $1 AND NOT (name = ANY($2::text[]))",
        event.server_id,
        names,
    )
    await conn.executemany(
        "INSERT INTO mcp.tools(name, original_name, description, input_schema, source_server_id, "
        "is_external, is_classified, discovered_at, updated_at) VALUES ($1, $2, $3, $4, $5, TRUE, FALSE, $6, $6) "
        "ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description, "
        "input_schema = EXCLUDED.input_schema, updated_at = EXCLUDED.updated_at, "
        "is_classified = mcp.tools.is_classified AND mcp.tools.description IS NOT DISTINCT FROM EXCLUDED.description",
        [
            (name, t.original_name, t.description, t.input_schema, event.server_id, event.occurred_at)
            for name, t in zip(names, event.tools, strict=True)
        ],
    )
    await conn.execute(
        "UPDATE mcp.external_servers SET tool_count = $2, updated_at = $3 WHERE id = $1",
        event.server_id,
        len(names),
        event.occurred_at,
    )
    await _history(conn, event, "TOOLS_DISCOVERED", {"tool_count": len(names)})


async def _tools_classified(conn: Conn, event: ToolsClassified) -> None:
    await conn.executemany(
        "UPDATE mcp.tools SET skill_ids = $3, primary_skill_id = $4, is_classified = TRUE, updated_at = $5 "
        "WHERE source_server_id = $1 AND name = $2",
        [
            (
                event.server_id,
                namespace_tool(event.server_name, t.original_name),
                [s.skill_id for s in t.skills],
                t.primary_skill_id,
                event.occurred_at,
            )
            for t in event.tools
        ],
    )


async def _health_checked(conn: Conn, event: HealthChecked) -> None:
    await conn.execute(
        "UPDATE mcp.external_servers SET last_health_check = $2, consecutive_failures = $3, "
        "last_response_time_ms = $4, last_error = CASE WHEN $5::text IS NULL THEN last_error ELSE $5 END "
        "WHERE id = $1",
        event.server_id,
        event.occurred_at,
        event.consecutive_failures,
        event.response_time_ms,
        event.error,
    )
    if not event.healthy:
        await _history(
            conn,
            event,
            "HEALTH_FAILED",
            {
                "error": event.error,
                "consecutive_failures": event.consecutive_failures,
                "counted": event.counted,
            },
        )


_HANDLERS: dict[type[Event], Callable[[Conn, Any], Awaitable[None]]] = {
    ServerRegistered: _server_registered,
    ServerStatusChanged: _status_changed,
    ServerRemoved: _server_removed,
    ToolsDiscovered: _tools_discovered,
    ToolsClassified: _tools_classified,
    HealthChecked: _health_checked,
}
