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
    CallsRecorded,
    EndpointDeleted,
    EndpointSaved,
    Event,
    HealthChecked,
    KeyCreated,
    KeyRevoked,
    PromptsDiscovered,
    ResourcesDiscovered,
    ServerConfigResealed,
    ServerDescribed,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    ToolsApproved,
    ToolsChanged,
    ToolsClassified,
    ToolsDiscovered,
    ToolsUnclassified,
)
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.naming import namespace_tool
from toolmesh.pinning import Pin, approvals, approve, definition_hash, review
from toolmesh.store.offerings_projection import prompts_discovered, resources_discovered, server_described

log = logging.getLogger("toolmesh.projection")
Conn = asyncpg.Connection | PoolConnectionProxy
PROJECTOR = "postgres"
READ_MODEL_TABLES = (
    "mcp.external_servers",
    "mcp.tools",
    "mcp.resources",
    "mcp.resource_templates",
    "mcp.prompts",
    "mcp.endpoints",
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
        handler = _HANDLERS.get(type(event))  # domain events (server.connected, ...) change no table
        if first_time and handler is not None:
            try:
                async with conn.transaction():  # a savepoint: a refused event leaves no half of itself
                    await handler(conn, event)
            except asyncpg.DataError as exc:
                # The database cannot hold this event (e.g. a NUL character in a text): skipping it,
                # the same way on every replay, is better than stopping the projection for every
                # event behind it.
                log.error("event %d (%s) cannot be stored and was skipped: %s", stream_seq, event.subject, exc)
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
        "timestamp, namespace) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        event.subject.removeprefix("toolmesh.evt."),
        event.event_id,
        event.server_id,
        name,
        event.actor,
        getattr(event, "ip_address", None),
        details,
        event.occurred_at,
        event.namespace,
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
                "health_check_url, status, registered_at, updated_at, namespace, new_tools, created_by) "
                "VALUES ($1, $2, $3, $4, $5, $6, 'DISCONNECTED', $7, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING",
                event.server_id,
                event.name,
                event.description,
                str(event.transport_type),
                {"sealed": event.sealed_config, "masked": event.masked_config},
                event.health_check_url,
                event.occurred_at,
                event.namespace,
                str(event.new_tools),
                event.actor,
            )
    except asyncpg.UniqueViolationError:
        # The name was taken in the namespace by another server id: the KV reservation failed open.
        # The UNIQUE constraint is the backstop; the losing registration is dropped.
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
        "retry_at = CASE WHEN $2::text = 'ERROR' THEN $5::timestamptz END, "
        "auto_retries = CASE WHEN $2::text = 'CONNECTED' THEN 0 "
        "  WHEN $5::timestamptz IS NOT NULL THEN auto_retries + 1 ELSE auto_retries END, "
        "updated_at = $4 WHERE id = $1 RETURNING name",
        event.server_id,
        str(event.status),
        event.error_message,
        event.occurred_at,
        event.retry_at,
    )
    if name is None:
        return
    details = {"status": str(event.status), "previous_status": event.previous_status, **event.details}
    if event.retry_at is not None:
        details["retry_at"] = event.retry_at.isoformat()
    if event.error_message:
        details["error_message"] = event.error_message
    await _history(conn, event, event.history, details)
    await _audit(conn, event, name, details)


async def _server_removed(conn: Conn, event: ServerRemoved) -> None:
    await conn.execute("DELETE FROM mcp.external_servers WHERE id = $1", event.server_id)
    await _audit(conn, event, event.name, {})


async def _tools_discovered(conn: Conn, event: ToolsDiscovered) -> None:
    server = await conn.fetchrow(
        "SELECT namespace, new_tools, tools_seen FROM mcp.external_servers WHERE id = $1", event.server_id
    )
    if server is None:
        return
    listed = {t.original_name: definition_hash(t.description, t.input_schema) for t in event.tools}
    rows = await conn.fetch(
        "SELECT original_name, approved_hash, definition_hash FROM mcp.tools WHERE source_server_id = $1",
        event.server_id,
    )
    stored = ((r["original_name"], r["definition_hash"], r["approved_hash"]) for r in rows)
    pins = review(
        listed.items(),
        approvals(stored, listed),
        first_list=not server["tools_seen"],
        policy=NewToolsPolicy(server["new_tools"]),
    )
    names = [namespace_tool(event.server_name, t.original_name) for t in event.tools]
    await conn.execute(
        "DELETE FROM mcp.tools WHERE source_server_id = $1 AND NOT (original_name = ANY($2::text[]))",
        event.server_id,
        [t.original_name for t in event.tools],
    )
    await conn.executemany(
        "INSERT INTO mcp.tools(name, original_name, description, input_schema, source_server_id, is_external, "
        "is_classified, discovered_at, updated_at, namespace, definition_hash, approved_hash, held_reason, "
        "held_fields, category) VALUES ($1, $2, $3, $4, $5, TRUE, FALSE, $6, $6, $7, $8, $9, $10, $11, $12) "
        "ON CONFLICT (source_server_id, original_name) DO UPDATE SET name = EXCLUDED.name, "
        "description = EXCLUDED.description, input_schema = EXCLUDED.input_schema, updated_at = EXCLUDED.updated_at, "
        "category = EXCLUDED.category, "
        "definition_hash = EXCLUDED.definition_hash, approved_hash = EXCLUDED.approved_hash, "
        "held_reason = EXCLUDED.held_reason, held_fields = EXCLUDED.held_fields, "
        "is_classified = mcp.tools.is_classified AND mcp.tools.description IS NOT DISTINCT FROM EXCLUDED.description, "
        "classification_status = CASE WHEN mcp.tools.description IS NOT DISTINCT FROM EXCLUDED.description "
        "  THEN mcp.tools.classification_status ELSE 'DISCOVERED' END",
        [
            (
                name,
                t.original_name,
                t.description,
                t.input_schema,
                event.server_id,
                event.occurred_at,
                server["namespace"],
                *_pin_columns(pins[t.original_name]),
                str(t.category),
            )
            for name, t in zip(names, event.tools, strict=True)
        ],
    )
    await conn.execute(
        "UPDATE mcp.external_servers SET tool_count = $2, updated_at = $3, tools_seen = TRUE WHERE id = $1",
        event.server_id,
        len(names),
        event.occurred_at,
    )
    held = sorted(name for name, pin in pins.items() if pin.hold is not None)
    await _history(conn, event, "TOOLS_DISCOVERED", {"tool_count": len(names), **({"held": held} if held else {})})


def _pin_columns(pin: Pin) -> tuple[str, str | None, str | None, list[str]]:
    hold = pin.hold
    return pin.definition_hash, pin.approved_hash, hold.reason if hold else None, hold.fields if hold else []


async def _tools_changed(conn: Conn, event: ToolsChanged) -> None:
    details = {"changes": [c.model_dump(exclude={"description"}) for c in event.changes]}
    await _history(conn, event, "TOOLS_CHANGED", details)
    await _audit(conn, event, event.server_name, details)


async def _tools_approved(conn: Conn, event: ToolsApproved) -> None:
    for tool in event.tools:
        row = await conn.fetchrow(
            "SELECT definition_hash, approved_hash FROM mcp.tools WHERE source_server_id = $1 AND original_name = $2",
            event.server_id,
            tool.original_name,
        )
        if row is None or row["definition_hash"] is None:
            continue  # a newer tool list dropped it
        pin = approve(Pin(row["definition_hash"], row["approved_hash"]), tool.definition_hash)
        await conn.execute(
            "UPDATE mcp.tools SET approved_hash = $3, held_reason = $4, held_fields = $5, updated_at = $6 "
            "WHERE source_server_id = $1 AND original_name = $2",
            event.server_id,
            tool.original_name,
            *_pin_columns(pin)[1:],
            event.occurred_at,
        )
    details = {"tools": [t.model_dump() for t in event.tools]}
    await _history(conn, event, "TOOLS_APPROVED", details)
    await _audit(conn, event, event.server_name, details)


async def _tools_classified(conn: Conn, event: ToolsClassified) -> None:
    await conn.executemany(
        "UPDATE mcp.tools SET skill_ids = $3, primary_skill_id = $4, is_classified = TRUE, updated_at = $5, "
        "classification_status = 'CLASSIFIED', classification_error = NULL "
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


async def _tools_unclassified(conn: Conn, event: ToolsUnclassified) -> None:
    await conn.execute(
        "UPDATE mcp.tools SET classification_status = 'UNCLASSIFIED', classification_error = $3, updated_at = $4 "
        "WHERE source_server_id = $1 AND original_name = ANY($2::text[]) AND NOT is_classified",
        event.server_id,
        event.tools,
        event.error,
        event.occurred_at,
    )
    await _history(conn, event, "CLASSIFICATION_FAILED", {"tools": event.tools, "attempts": event.attempts})


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


async def _config_resealed(conn: Conn, event: ServerConfigResealed) -> None:
    name = await conn.fetchval(
        "UPDATE mcp.external_servers "
        "SET connection_config = jsonb_set(connection_config, '{sealed}', to_jsonb($2::text)) "
        "WHERE id = $1 RETURNING name",
        event.server_id,
        event.sealed_config,
    )
    if name is not None:
        await _audit(conn, event, name, {"key_id": event.key_id})


async def _key_changed(conn: Conn, event: KeyCreated | KeyRevoked) -> None:
    await _audit(conn, event, None, {"key_id": event.key_id, "name": event.name, "role": event.role})


async def _calls_recorded(conn: Conn, event: CallsRecorded) -> None:
    await conn.executemany(
        "INSERT INTO mcp.audit_log(event, event_id, server_id, server_name, actor, ip_address, details, timestamp, "
        "namespace) VALUES ('tool.called', $1, $2, $3, $4, $5, $6, $7, $8)",
        [
            (
                event.event_id,
                call.server_id,
                call.server_name,
                call.actor,
                call.ip_address,
                {
                    "tool": call.tool,
                    "outcome": call.outcome,
                    "error_code": call.error_code,
                    "duration_ms": call.duration_ms,
                },
                call.at,
                event.namespace,
            )
            for call in event.calls
        ],
    )


async def _endpoint_saved(conn: Conn, event: EndpointSaved) -> None:
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO mcp.endpoints(id, namespace, name, description, include, exclude, overrides, created_by, "
                "created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) "
                "ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, description = EXCLUDED.description, "
                "include = EXCLUDED.include, exclude = EXCLUDED.exclude, overrides = EXCLUDED.overrides, "
                "updated_at = EXCLUDED.updated_at",
                event.endpoint_id,
                event.namespace,
                event.name,
                event.description,
                event.include,
                event.exclude,
                event.overrides,
                event.actor,
                event.occurred_at,
            )
    except asyncpg.UniqueViolationError:
        log.error("endpoint %s dropped: the name is taken in %s", event.name, event.namespace)
        return
    await _audit(conn, event, None, {"endpoint_id": event.endpoint_id, "name": event.name})


async def _endpoint_deleted(conn: Conn, event: EndpointDeleted) -> None:
    await conn.execute("DELETE FROM mcp.endpoints WHERE id = $1", event.endpoint_id)
    await _audit(conn, event, None, {"endpoint_id": event.endpoint_id, "name": event.name})


_HANDLERS: dict[type[Event], Callable[[Conn, Any], Awaitable[None]]] = {
    ServerRegistered: _server_registered,
    ServerStatusChanged: _status_changed,
    ServerRemoved: _server_removed,
    ToolsDiscovered: _tools_discovered,
    ToolsClassified: _tools_classified,
    ToolsUnclassified: _tools_unclassified,
    ToolsChanged: _tools_changed,
    ToolsApproved: _tools_approved,
    HealthChecked: _health_checked,
    ServerConfigResealed: _config_resealed,
    KeyCreated: _key_changed,
    KeyRevoked: _key_changed,
    CallsRecorded: _calls_recorded,
    ServerDescribed: server_described,
    ResourcesDiscovered: resources_discovered,
    PromptsDiscovered: prompts_discovered,
    EndpointSaved: _endpoint_saved,
    EndpointDeleted: _endpoint_deleted,
}
