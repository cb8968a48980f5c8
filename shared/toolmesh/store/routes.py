"""The read model as routing needs it: servers, tools, and the stream sequence they include."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from toolmesh.lifecycle import ServerStatus
from toolmesh.routing import ServerRoute
from toolmesh.store.projection import PROJECTOR


@dataclass
class RouteSnapshot:
    """Servers and ``(server_id, original_name)`` tool pairs exactly as of stream sequence ``seq``."""

    servers: list[ServerRoute]
    tools: list[tuple[str, str]]
    seq: int


async def route_snapshot(db: asyncpg.Pool) -> RouteSnapshot:
    """Read rows and checkpoint in one repeatable-read transaction, so they match each other."""
    async with db.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        seq = await conn.fetchval("SELECT last_seq FROM mcp.projector_checkpoint WHERE projector = $1", PROJECTOR)
        servers = await conn.fetch("SELECT id::text AS id, name, status FROM mcp.external_servers")
        tools = await conn.fetch(
            "SELECT source_server_id::text AS server_id, original_name FROM mcp.tools "
            "WHERE source_server_id IS NOT NULL AND original_name IS NOT NULL"
        )
    return RouteSnapshot(
        servers=[ServerRoute(r["id"], r["name"], ServerStatus(r["status"])) for r in servers],
        tools=[(r["server_id"], r["original_name"]) for r in tools],
        seq=int(seq or 0),
    )
