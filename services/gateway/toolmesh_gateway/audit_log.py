"""Reads of the audit log (the projector writes it from events)."""

from __future__ import annotations

import asyncpg

Row = asyncpg.Record


async def audit_page(
    db: asyncpg.Pool,
    *,
    namespace: str | None,
    actor: str | None,
    event: str | None,
    limit: int,
    offset: int,
) -> tuple[list[Row], int]:
    """Entries matching every given filter, newest first, and how many match."""
    where = (
        "WHERE ($1::text IS NULL OR namespace = $1::text) AND ($2::text IS NULL OR actor = $2::text) "
        "AND ($3::text IS NULL OR event = $3::text)"
    )
    args = (namespace, actor, event)
    total = await db.fetchval(f"SELECT count(*) FROM mcp.audit_log {where}", *args)
    rows = await db.fetch(
        "SELECT event, event_id::text AS event_id, server_id::text AS server_id, server_name, actor, namespace, "
        f"ip_address, timestamp, details FROM mcp.audit_log {where} ORDER BY id DESC LIMIT $4 OFFSET $5",
        *args,
        limit,
        offset,
    )
    return list(rows), int(total)
