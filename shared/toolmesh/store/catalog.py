"""The read model as the gateway's catalog needs it: servers with transports, tools with schemas."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from toolmesh.store.projection import PROJECTOR


@dataclass
class CatalogSnapshot:
    """Server rows (``id, name, transport_type, status``) and tool rows
    (``server_id, original_name, description, input_schema``) exactly as of stream sequence ``seq``."""

    servers: list[asyncpg.Record]
    tools: list[asyncpg.Record]
    seq: int


async def catalog_snapshot(db: asyncpg.Pool) -> CatalogSnapshot:
    """Read rows and checkpoint in one repeatable-read transaction, so they match each other."""
    async with db.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        seq = await conn.fetchval("SELECT last_seq FROM mcp.projector_checkpoint WHERE projector = $1", PROJECTOR)
        servers = await conn.fetch("SELECT id::text AS id, name, transport_type, status FROM mcp.external_servers")
        tools = await conn.fetch(
            "SELECT source_server_id::text AS server_id, original_name, description, input_schema FROM mcp.tools "
            "WHERE source_server_id IS NOT NULL AND original_name IS NOT NULL"
        )
    return CatalogSnapshot(list(servers), list(tools), int(seq or 0))
