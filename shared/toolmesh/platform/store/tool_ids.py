"""Search's one read of Postgres: the database ids of tools found in the index."""

from __future__ import annotations

import asyncpg


async def tool_db_ids(db: asyncpg.Pool, tools: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """``{(server id, original name): mcp.tools.id}`` for the tools that exist.

    A tool is its server's: the namespaced name (``github.echo``) is the same in every namespace that
    has a server of that name, so it never picks the row.
    """
    rows = await db.fetch(
        "SELECT t.source_server_id::text AS server_id, t.original_name, t.id FROM mcp.tools t "
        "JOIN unnest($1::uuid[], $2::text[]) AS w(server_id, original_name) "
        "ON t.source_server_id = w.server_id AND t.original_name = w.original_name",
        [server_id for server_id, _ in tools],
        [name for _, name in tools],
    )
    return {(r["server_id"], r["original_name"]): int(r["id"]) for r in rows}
