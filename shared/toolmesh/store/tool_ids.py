"""Search's one read of Postgres: the database ids of tools found in the index."""

from __future__ import annotations

import asyncpg


async def tool_db_ids(db: asyncpg.Pool, names: list[str]) -> dict[str, int]:
    """``{namespaced name: mcp.tools.id}`` for the names that exist."""
    rows = await db.fetch("SELECT name, id FROM mcp.tools WHERE name = ANY($1::text[])", names)
    return {r["name"]: int(r["id"]) for r in rows}
