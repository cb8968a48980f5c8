"""The API's reads of the projection (no writes here: the projector owns the read model)."""

from __future__ import annotations

from typing import Any

import asyncpg

from toolmesh.lifecycle import SESSION_WANTED, ServerStatus
from toolmesh.store.projection import PROJECTOR

Row = asyncpg.Record
_SERVER_COLUMNS = (
    "id::text AS id, name, description, transport_type, connection_config, health_check_url, status, "
    "last_health_check, consecutive_failures, last_response_time_ms, last_error, tool_count, error_message, "
    "registered_at, connected_at, updated_at"
)
_TOOL_COLUMNS = (
    "id::text AS id, name, original_name, description, input_schema, source_server_id::text AS server_id, "
    "is_classified, skill_ids, primary_skill_id, discovered_at"
)


async def applied_sequence(db: asyncpg.Pool | asyncpg.Connection) -> int:
    """The last stream sequence the projector has applied (0 before any)."""
    value = await db.fetchval("SELECT last_seq FROM mcp.projector_checkpoint WHERE projector = $1", PROJECTOR)
    return int(value or 0)


async def get_server(db: asyncpg.Pool, server_id: str) -> Row | None:
    """One server by id (None when unknown or not a UUID)."""
    try:
        return await db.fetchrow(f"SELECT {_SERVER_COLUMNS} FROM mcp.external_servers WHERE id = $1::uuid", server_id)
    except asyncpg.DataError:
        return None


async def get_server_by_name(db: asyncpg.Pool, name: str) -> Row | None:
    """One server by its registered name."""
    return await db.fetchrow(f"SELECT {_SERVER_COLUMNS} FROM mcp.external_servers WHERE name = $1", name)


async def list_servers(
    db: asyncpg.Pool, *, status: ServerStatus | None, limit: int, offset: int
) -> tuple[list[Row], int]:
    """A page of servers ordered by name, and the total matching the filter."""
    where, args = ("WHERE status = $1", [str(status)]) if status else ("", [])
    total = await db.fetchval(f"SELECT count(*) FROM mcp.external_servers {where}", *args)
    rows = await db.fetch(
        f"SELECT {_SERVER_COLUMNS} FROM mcp.external_servers {where} ORDER BY name "
        f"LIMIT ${len(args) + 1} OFFSET ${len(args) + 2}",
        *args,
        limit,
        offset,
    )
    return list(rows), int(total)


async def list_tools(db: asyncpg.Pool, server_ids: list[str]) -> list[Row]:
    """Every tool of the given servers, ordered by server then name."""
    return list(
        await db.fetch(
            f"SELECT {_TOOL_COLUMNS} FROM mcp.tools WHERE source_server_id = ANY($1::uuid[]) "
            "ORDER BY source_server_id, name",
            server_ids,
        )
    )


async def connection_history(db: asyncpg.Pool, server_id: str, limit: int = 100) -> list[Row]:
    """The latest connection-history rows of one server, oldest first."""
    rows = await db.fetch(
        "SELECT event_type, details, timestamp FROM mcp.server_connection_history WHERE server_id = $1::uuid "
        "ORDER BY id DESC LIMIT $2",
        server_id,
        limit,
    )
    return list(reversed(rows))


async def servers_wanting_sessions(db: asyncpg.Pool) -> list[Row]:
    """Servers whose state says a session should be live (the reconciler's work list)."""
    return list(
        await db.fetch(
            f"SELECT {_SERVER_COLUMNS} FROM mcp.external_servers WHERE status = ANY($1::text[])",
            [str(s) for s in SESSION_WANTED],
        )
    )


async def status_counts(db: asyncpg.Pool) -> dict[str, int]:
    """Number of servers in each status."""
    rows = await db.fetch("SELECT status, count(*) AS n FROM mcp.external_servers GROUP BY status")
    return {r["status"]: int(r["n"]) for r in rows}


async def tool_counts(db: asyncpg.Pool) -> dict[str, Any]:
    """Total and classified external tools, and when the projection last changed."""
    row = await db.fetchrow(
        "SELECT count(*) AS total, count(*) FILTER (WHERE is_classified) AS classified, "
        "(SELECT max(updated_at) FROM mcp.external_servers) AS last_sync FROM mcp.tools WHERE is_external"
    )
    assert row is not None
    return dict(row)


async def principal_for_token_hash(db: asyncpg.Pool, token_hash: str) -> Row | None:
    """The principal owning an API key hash."""
    return await db.fetchrow("SELECT id, name, role, namespace FROM mcp.principals WHERE token_hash = $1", token_hash)


async def upsert_principal(db: asyncpg.Pool, *, name: str, token_hash: str, role: str, namespace: str) -> None:
    """Create or re-key a principal (the first admin is seeded this way at start-up)."""
    await db.execute(
        "INSERT INTO mcp.principals(name, token_hash, role, namespace) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (name) DO UPDATE SET token_hash = EXCLUDED.token_hash, role = EXCLUDED.role",
        name,
        token_hash,
        role,
        namespace,
    )
