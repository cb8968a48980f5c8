"""The rows every projected event may leave behind: the audit log and a server's connection history."""

from __future__ import annotations

from typing import Any

from toolmesh.contracts.events import Event
from toolmesh.platform.store.connections import Conn


async def audit(conn: Conn, event: Event, name: str | None, details: dict[str, Any]) -> None:
    """One audit-log row for ``event`` (``name``: the server's name, when there is one)."""
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


async def history(conn: Conn, event: Event, kind: str, details: dict[str, Any]) -> None:
    """One row of the server's connection history (nothing once the server is gone)."""
    await conn.execute(
        "INSERT INTO mcp.server_connection_history(server_id, event_type, details, timestamp) "
        "SELECT id, $2, $3, $4 FROM mcp.external_servers WHERE id = $1",
        event.server_id,
        kind,
        details,
        event.occurred_at,
    )
