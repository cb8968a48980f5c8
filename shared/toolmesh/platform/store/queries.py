"""The API's reads of the projection (no writes here: the projector owns the read model)."""

from __future__ import annotations

from typing import Any

import asyncpg

from toolmesh.lifecycle import SESSION_WANTED, ServerStatus
from toolmesh.platform.store.connections import Db

PROJECTOR = "postgres"
"""The ``mcp.projector_checkpoint`` row of the Postgres projector: it writes it, reads of the projection
wait on it."""
Row = asyncpg.Record
_SERVER_COLUMNS = (
    "id::text AS id, name, namespace, description, transport_type, connection_config, health_check_url, status, "
    "last_health_check, consecutive_failures, last_response_time_ms, last_error, tool_count, error_message, "
    "registered_at, connected_at, updated_at, new_tools, created_by, tools_seen, retry_at, auto_retries"
)
_TOOL_COLUMNS = (
    "id::text AS id, name, original_name, description, input_schema, source_server_id::text AS server_id, "
    "is_classified, skill_ids, primary_skill_id, discovered_at, namespace, definition_hash, approved_hash, "
    "held_reason, held_fields, category, classification_status, classification_error, title, annotations, "
    "output_schema"
)
_IN_NAMESPACE = "($2::text IS NULL OR namespace = $2::text)"
"""Every read takes the caller's namespace; None (the owner) reads every namespace."""


async def applied_sequence(db: Db) -> int:
    """The last stream sequence the projector has applied (0 before any)."""
    value = await db.fetchval("SELECT last_seq FROM mcp.projector_checkpoint WHERE projector = $1", PROJECTOR)
    return int(value or 0)


async def row_by_id(db: Db, select: str, row_id: str, namespace: str | None) -> Row | None:
    """The row of ``select`` (``SELECT <columns> FROM <table with id and namespace>``) whose id is
    ``row_id``, in ``namespace`` (None: any); None when unknown, elsewhere or not a UUID."""
    try:
        return await db.fetchrow(f"{select} WHERE id = $1::uuid AND {_IN_NAMESPACE}", row_id, namespace)
    except asyncpg.DataError:
        return None


async def get_server(db: asyncpg.Pool, server_id: str, namespace: str | None = None) -> Row | None:
    """One server by id, in ``namespace`` (None: any); None when unknown, elsewhere or not a UUID."""
    return await row_by_id(db, f"SELECT {_SERVER_COLUMNS} FROM mcp.external_servers", server_id, namespace)


async def get_server_by_name(db: asyncpg.Pool, name: str, namespace: str) -> Row | None:
    """One server by its registered name in a namespace."""
    return await db.fetchrow(
        f"SELECT {_SERVER_COLUMNS} FROM mcp.external_servers WHERE name = $1 AND namespace = $2", name, namespace
    )


async def list_servers(
    db: asyncpg.Pool,
    namespace: str | None,
    *,
    status: ServerStatus | None,
    limit: int,
    offset: int,
    agent: str | None = None,
) -> tuple[list[Row], int]:
    """A page of the namespace's servers ordered by name (then namespace), and the total matching;
    with ``agent``, only the servers that principal registered, newest first."""
    where = (
        "WHERE ($1::text IS NULL OR namespace = $1::text) AND ($2::text IS NULL OR status = $2::text) "
        "AND ($3::text IS NULL OR created_by = $3::text)"
    )
    order = "registered_at DESC, id" if agent is not None else "name, namespace"
    args = [namespace, str(status) if status else None, agent]
    total = await db.fetchval(f"SELECT count(*) FROM mcp.external_servers {where}", *args)
    rows = await db.fetch(
        f"SELECT {_SERVER_COLUMNS} FROM mcp.external_servers {where} ORDER BY {order} LIMIT $4 OFFSET $5",
        *args,
        limit,
        offset,
    )
    return list(rows), int(total)


async def count_servers(db: asyncpg.Pool) -> int:
    """Servers registered in every namespace (the registration limit counts them all)."""
    return int(await db.fetchval("SELECT count(*) FROM mcp.external_servers"))


async def count_servers_in(db: asyncpg.Pool, namespace: str) -> int:
    """Servers registered in one namespace (its own registration limit)."""
    return int(await db.fetchval("SELECT count(*) FROM mcp.external_servers WHERE namespace = $1", namespace))


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
    """Servers whose state says a session should be live, and those in ERROR whose automatic retry is
    due (the reconciler's work list)."""
    return list(
        await db.fetch(
            f"SELECT {_SERVER_COLUMNS} FROM mcp.external_servers "
            "WHERE status = ANY($1::text[]) OR (status = 'ERROR' AND retry_at <= now())",
            [str(s) for s in SESSION_WANTED],
        )
    )


async def status_counts(db: asyncpg.Pool, namespace: str | None) -> dict[str, int]:
    """Number of the namespace's servers in each status."""
    rows = await db.fetch(
        "SELECT status, count(*) AS n FROM mcp.external_servers WHERE $1::text IS NULL OR namespace = $1::text "
        "GROUP BY status",
        namespace,
    )
    return {r["status"]: int(r["n"]) for r in rows}


async def tool_counts(db: asyncpg.Pool, namespace: str | None) -> dict[str, Any]:
    """Total, classified and held external tools of the namespace, and when its projection last changed."""
    row = await db.fetchrow(
        "SELECT count(*) AS total, count(*) FILTER (WHERE is_classified) AS classified, "
        "count(*) FILTER (WHERE held_reason IS NOT NULL) AS held, "
        "(SELECT max(updated_at) FROM mcp.external_servers WHERE $1::text IS NULL OR namespace = $1::text) "
        "AS last_sync FROM mcp.tools WHERE is_external AND ($1::text IS NULL OR namespace = $1::text)",
        namespace,
    )
    assert row is not None
    return dict(row)


async def tool_pins(db: asyncpg.Pool, server_id: str) -> tuple[Row | None, list[Row]]:
    """What pinning needs of a server: its ``new_tools`` and ``tools_seen``, and each tool's
    ``original_name``, ``definition_hash``, ``approved_hash`` and ``held_reason``."""
    server = await db.fetchrow("SELECT new_tools, tools_seen FROM mcp.external_servers WHERE id = $1::uuid", server_id)
    rows = await db.fetch(
        "SELECT original_name, definition_hash, approved_hash, held_reason FROM mcp.tools "
        "WHERE source_server_id = $1::uuid",
        server_id,
    )
    return server, list(rows)


async def sealed_configs(db: asyncpg.Pool) -> list[Row]:
    """Every server's id, name, namespace and connection config (sealed and masked), for key rotation."""
    return list(
        await db.fetch(
            "SELECT id::text AS id, name, namespace, connection_config FROM mcp.external_servers ORDER BY id"
        )
    )


async def list_resources(db: asyncpg.Pool, server_id: str) -> tuple[list[Row], list[Row]]:
    """The resources and resource templates of one server (``item`` is the upstream's wire form)."""
    resources = await db.fetch(
        "SELECT uri, item, discovered_at FROM mcp.resources WHERE server_id = $1::uuid ORDER BY uri", server_id
    )
    templates = await db.fetch(
        "SELECT uri_template, item, discovered_at FROM mcp.resource_templates WHERE server_id = $1::uuid "
        "ORDER BY uri_template",
        server_id,
    )
    return list(resources), list(templates)


async def template_approvals(db: asyncpg.Pool, namespace: str, server_name: str) -> dict[str, str]:
    """The approved hashes of flagged resource templates of a server's name, by URI template."""
    rows = await db.fetch(
        "SELECT uri_template, approved_hash FROM mcp.template_approvals WHERE namespace = $1 AND server_name = $2",
        namespace,
        server_name,
    )
    return {r["uri_template"]: r["approved_hash"] for r in rows}


async def server_instructions(db: asyncpg.Pool, server_id: str) -> Row | None:
    """A server's ``instructions`` as its upstream last gave them, and the approved ones
    (``instructions_hash``, ``approved_instructions``)."""
    return await db.fetchrow(
        "SELECT instructions, instructions_hash, approved_instructions FROM mcp.external_servers WHERE id = $1::uuid",
        server_id,
    )


async def list_prompts(db: asyncpg.Pool, server_id: str) -> list[Row]:
    """The prompts of one server (``item`` is the upstream's wire form) with their pins
    (``definition_hash``, ``held_reason``, ``held_fields``)."""
    rows = await db.fetch(
        "SELECT original_name, item, discovered_at, definition_hash, held_reason, held_fields FROM mcp.prompts "
        "WHERE server_id = $1::uuid ORDER BY original_name",
        server_id,
    )
    return list(rows)
