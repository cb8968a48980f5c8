"""The read model as the gateway's catalog needs it: servers with transports, tools with schemas."""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg

from toolmesh.pinning import EveryLeft
from toolmesh.platform.store.queries import PROJECTOR
from toolmesh.platform.store.retired_pins import every_left
from toolmesh_gateway.endpoint_reads import list_endpoints


@dataclass
class CatalogSnapshot:
    """Server rows (``id, name, namespace, transport_type, status, new_tools, tools_seen, prompts_seen,
    registered_seq`` and the upstream's own description with its approved instructions), tool rows
    (``server_id, original_name, description, input_schema``, pinning columns and ``category``), the
    ``server_id, item`` rows of resources and resource templates, prompt rows (with ``original_name``
    and pinning columns), the policies on tool calls, and what removed servers left to their
    (namespace, name), exactly as of stream sequence ``seq``."""

    servers: list[asyncpg.Record]
    tools: list[asyncpg.Record]
    seq: int
    resources: list[asyncpg.Record] = field(default_factory=list)
    templates: list[asyncpg.Record] = field(default_factory=list)
    prompts: list[asyncpg.Record] = field(default_factory=list)
    endpoints: list[asyncpg.Record] = field(default_factory=list)
    policies: list[asyncpg.Record] = field(default_factory=list)
    left: EveryLeft = field(default_factory=lambda: EveryLeft({}, {}, {}))


async def catalog_snapshot(db: asyncpg.Pool) -> CatalogSnapshot:
    """Read rows and checkpoint in one repeatable-read transaction, so they match each other."""
    async with db.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        seq = await conn.fetchval("SELECT last_seq FROM mcp.projector_checkpoint WHERE projector = $1", PROJECTOR)
        servers = await conn.fetch(
            "SELECT id::text AS id, name, namespace, transport_type, status, new_tools, tools_seen, prompts_seen, "
            "COALESCE(registered_seq, 0) AS registered_seq, "
            "protocol_version, capabilities, server_info, instructions, instructions_hash, approved_instructions, "
            "modern_versions, modern_only, modern_tasks "
            "FROM mcp.external_servers"
        )
        tools = await conn.fetch(
            "SELECT source_server_id::text AS server_id, original_name, description, input_schema, definition_hash, "
            "approved_hash, held_reason, held_fields, category, title, annotations, output_schema, task_support, "
            "CASE WHEN is_classified THEN skill_ids END AS skill_ids FROM mcp.tools "
            "WHERE source_server_id IS NOT NULL AND original_name IS NOT NULL"
        )
        resources = await conn.fetch("SELECT server_id::text AS server_id, item FROM mcp.resources")
        templates = await conn.fetch("SELECT server_id::text AS server_id, item FROM mcp.resource_templates")
        prompts = await conn.fetch(
            "SELECT server_id::text AS server_id, original_name, item, definition_hash, approved_hash, held_reason, "
            "held_fields FROM mcp.prompts"
        )
        endpoints = await list_endpoints(conn, None)
        left = await every_left(conn)
        policies = await conn.fetch(
            "SELECT id::text AS id, namespace, name, expression, effect, reason, redact, mode FROM mcp.policies"
        )
    return CatalogSnapshot(
        list(servers),
        list(tools),
        int(seq or 0),
        list(resources),
        list(templates),
        list(prompts),
        endpoints,
        list(policies),
        left,
    )
