"""The projector's writes: each event applied once, in the same transaction as the checkpoint.

Every timestamp comes from the event, never from the clock, so a replay gives identical rows.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from toolmesh.contracts.approvals import ApprovalDecided, ApprovalRequested
from toolmesh.contracts.events import (
    Event,
    HealthChecked,
    InstructionsApproved,
    PromptsApproved,
    PromptsDiscovered,
    ResourcesDiscovered,
    ServerConfigResealed,
    ServerDescribed,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    TemplatesApproved,
    ToolsApproved,
    ToolsChanged,
    ToolsClassified,
    ToolsDiscovered,
    ToolsUnclassified,
)
from toolmesh.contracts.namespace_events import (
    AppConnected,
    AppDisconnected,
    CallsRecorded,
    EndpointDeleted,
    EndpointSaved,
    KeyCreated,
    KeyRevoked,
)
from toolmesh.contracts.policies import PolicyDeleted, PolicySaved
from toolmesh.contracts.quotas import QuotaChange, QuotaCreated, QuotaDeleted, QuotaUpdated
from toolmesh.platform.store.connections import Conn
from toolmesh.platform.store.principals import BOOTSTRAP_OWNER
from toolmesh.platform.store.queries import PROJECTOR
from toolmesh.platform.store.retired_pins import retire_pins
from toolmesh.platform.store.upstream_tokens import drop_grants
from toolmesh_projector.offerings_projection import (
    instructions_approved,
    resources_discovered,
    server_described,
    templates_approved,
)
from toolmesh_projector.policies_projection import policy_deleted, policy_saved
from toolmesh_projector.projection_trail import audit, history
from toolmesh_projector.prompts_projection import prompts_approved, prompts_discovered
from toolmesh_projector.tools_projection import (
    tools_approved,
    tools_changed,
    tools_classified,
    tools_discovered,
    tools_unclassified,
)

log = logging.getLogger("toolmesh.projection")
READ_MODEL_TABLES = (
    "mcp.external_servers",
    "mcp.tools",
    "mcp.resources",
    "mcp.resource_templates",
    "mcp.template_approvals",
    "mcp.prompts",
    "mcp.endpoints",
    "mcp.policies",
    "mcp.policy_versions",
    "mcp.retired_pins",
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


async def _server_registered(conn: Conn, event: ServerRegistered) -> None:
    private_network = event.private_network
    if private_network is None:  # registered before the egress policy: decided by who registered it
        private_network = await conn.fetchval(
            "SELECT mcp.registered_by_manager($1, $2, NULL, $3)", event.actor, event.namespace, BOOTSTRAP_OWNER
        )
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO mcp.external_servers(id, name, description, transport_type, connection_config, "
                "health_check_url, status, registered_at, updated_at, namespace, new_tools, created_by, "
                "registered_seq) VALUES ($1, $2, $3, $4, $5, $6, 'DISCONNECTED', $7, $7, $8, $9, $10, "
                "(SELECT stream_seq FROM mcp.applied_events WHERE event_id = $11)) ON CONFLICT (id) DO NOTHING",
                event.server_id,
                event.name,
                event.description,
                str(event.transport_type),
                {
                    "sealed": event.sealed_config,
                    "masked": event.masked_config,
                    "private_network": private_network,
                },
                event.health_check_url,
                event.occurred_at,
                event.namespace,
                str(event.new_tools),
                event.actor,
                event.event_id,
            )
    except asyncpg.UniqueViolationError:
        # The name was taken in the namespace by another server id: the KV reservation failed open.
        # The UNIQUE constraint is the backstop; the losing registration is dropped.
        log.error("registration of %s dropped: name already taken", event.name, extra={"server": event.name})
        return
    await history(conn, event, "REGISTERED", {"actor": event.actor})
    await audit(conn, event, event.name, {"transport_type": str(event.transport_type)})


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
    await history(conn, event, event.history, details)
    await audit(conn, event, name, details)


async def _server_removed(conn: Conn, event: ServerRemoved) -> None:
    await retire_pins(conn, event.server_id)
    await conn.execute("DELETE FROM mcp.external_servers WHERE id = $1", event.server_id)
    await drop_grants(conn, event.server_id)  # its upstream OAuth tokens go with it
    await audit(conn, event, event.name, {})


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
        await history(
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
        await audit(conn, event, name, {"key_id": event.key_id})


async def _key_changed(conn: Conn, event: KeyCreated | KeyRevoked) -> None:
    await audit(conn, event, None, {"key_id": event.key_id, "name": event.name, "role": event.role})


async def _app_changed(conn: Conn, event: AppConnected | AppDisconnected) -> None:
    details: dict[str, str | None] = {"grant_id": event.grant_id, "key_id": event.key_id, "client_id": event.client_id}
    details["client_name"] = event.client_name
    if isinstance(event, AppConnected):
        details["resource"] = event.resource
    else:
        details["reason"] = event.reason
    await audit(conn, event, None, details)


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
                    **({"policy": call.policy, "policy_effect": call.policy_effect} if call.policy else {}),
                    **({"result_scanned": call.result_scanned} if call.result_scanned is not None else {}),
                    **({"result_findings": call.result_findings} if call.result_findings else {}),
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
    await audit(conn, event, None, {"endpoint_id": event.endpoint_id, "name": event.name})


async def _endpoint_deleted(conn: Conn, event: EndpointDeleted) -> None:
    await conn.execute("DELETE FROM mcp.endpoints WHERE id = $1", event.endpoint_id)
    await audit(conn, event, None, {"endpoint_id": event.endpoint_id, "name": event.name})


async def _approval(conn: Conn, event: ApprovalRequested | ApprovalDecided) -> None:
    details: dict[str, Any] = {"approval_id": event.approval_id, "tool": event.tool}
    if isinstance(event, ApprovalRequested):
        details.update(policy=event.policy, reason=event.reason, surface=event.surface)
        details["deadline"] = event.deadline.isoformat()
    else:
        details.update(state=str(event.state), comment=event.comment, caller=event.caller)
    await audit(conn, event, event.server_name, details)


async def _quota_changed(conn: Conn, event: QuotaChange) -> None:
    details = event.model_dump(mode="json", include={"quota_id", "before", "after"})
    await audit(conn, event, None, details)


_HANDLERS: dict[type[Event], Callable[[Conn, Any], Awaitable[None]]] = {
    ServerRegistered: _server_registered,
    ServerStatusChanged: _status_changed,
    ServerRemoved: _server_removed,
    ToolsDiscovered: tools_discovered,
    ToolsClassified: tools_classified,
    ToolsUnclassified: tools_unclassified,
    ToolsChanged: tools_changed,
    ToolsApproved: tools_approved,
    HealthChecked: _health_checked,
    ServerConfigResealed: _config_resealed,
    KeyCreated: _key_changed,
    KeyRevoked: _key_changed,
    AppConnected: _app_changed,
    AppDisconnected: _app_changed,
    CallsRecorded: _calls_recorded,
    ServerDescribed: server_described,
    ResourcesDiscovered: resources_discovered,
    PromptsDiscovered: prompts_discovered,
    PromptsApproved: prompts_approved,
    TemplatesApproved: templates_approved,
    InstructionsApproved: instructions_approved,
    EndpointSaved: _endpoint_saved,
    EndpointDeleted: _endpoint_deleted,
    PolicySaved: policy_saved,
    PolicyDeleted: policy_deleted,
    QuotaCreated: _quota_changed,
    QuotaUpdated: _quota_changed,
    QuotaDeleted: _quota_changed,
    ApprovalRequested: _approval,
    ApprovalDecided: _approval,
}
