"""Reads of the projection for health monitoring (the scheduler's work list, a check's state)."""

from __future__ import annotations

import asyncpg

from toolmesh.health import CHECKED

Row = asyncpg.Record


async def servers_to_check(db: asyncpg.Pool) -> list[str]:
    """Ids of the servers whose state is health-checked each interval (CONNECTED, DEGRADED)."""
    rows = await db.fetch(
        "SELECT id::text AS id FROM mcp.external_servers WHERE status = ANY($1::text[]) ORDER BY id",
        [str(s) for s in CHECKED],
    )
    return [r["id"] for r in rows]


async def health_state(db: asyncpg.Pool, server_id: str) -> Row | None:
    """What one check needs: name, status, health URL, whether an owner or admin registered it (its URLs
    may reach private addresses) and the failures counted so far."""
    return await db.fetchrow(
        "SELECT id::text AS id, name, namespace, status, health_check_url, consecutive_failures, "
        "COALESCE((connection_config->>'private_network')::boolean, false) AS private_network "
        "FROM mcp.external_servers WHERE id = $1::uuid",
        server_id,
    )
