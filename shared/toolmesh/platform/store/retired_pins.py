"""Pins a removed server leaves to its name in its namespace (``mcp.retired_pins``).

The projector writes them when it removes a server whose tool list was seen; discovery of the
next server registered under that name reviews its first tool list against them
(``toolmesh.pinning.inherit``), so removing and registering a server again approves nothing; a
removed server's prompt pins and approved instructions are kept beside them, for the next server's
first prompt list and first description. Approvals of flagged resource templates are kept by name
from the start (``mcp.template_approvals``), so they need no retiring.
"""

from __future__ import annotations

from asyncpg import Record

from toolmesh.pinning import ApprovedText, EveryLeft, Pin, retired
from toolmesh.platform.store.connections import Conn, Db

Left = dict[str, str | None]
"""Approved hash (or None) by original tool name."""


async def retire_pins(conn: Conn, server_id: str) -> None:
    """Keep the tool, prompt and instructions pins of a server about to be removed under its (namespace,
    name) (a list never seen pinned nothing: what an earlier server of the name left of it stays)."""
    server = await conn.fetchrow(
        "SELECT namespace, name, tools_seen, prompts_seen, instructions_hash, approved_instructions "
        "FROM mcp.external_servers WHERE id = $1",
        server_id,
    )
    if server is None or not (server["tools_seen"] or server["prompts_seen"] or server["instructions_hash"]):
        return
    tools = await conn.fetch(
        "SELECT original_name, definition_hash, approved_hash FROM mcp.tools "
        "WHERE source_server_id = $1 AND original_name IS NOT NULL",
        server_id,
    )
    prompts = await conn.fetch(
        "SELECT original_name, definition_hash, approved_hash FROM mcp.prompts WHERE server_id = $1", server_id
    )
    await conn.execute(
        "INSERT INTO mcp.retired_pins(namespace, server_name, approved, prompts, instructions) "
        "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (namespace, server_name) DO UPDATE SET "
        "approved = COALESCE(EXCLUDED.approved, mcp.retired_pins.approved), "
        "prompts = COALESCE(EXCLUDED.prompts, mcp.retired_pins.prompts), "
        "instructions = COALESCE(EXCLUDED.instructions, mcp.retired_pins.instructions)",
        server["namespace"],
        server["name"],
        _left(tools) if server["tools_seen"] else None,
        _left(prompts) if server["prompts_seen"] else None,
        {"hash": server["instructions_hash"], "text": server["approved_instructions"]}
        if server["instructions_hash"]
        else None,
    )


def _left(rows: list[Record]) -> Left:
    return retired(
        (r["original_name"], Pin(r["definition_hash"], r["approved_hash"]) if r["definition_hash"] else None)
        for r in rows
    )


async def pins_left(db: Db, namespace: str, name: str) -> Left | None:
    """What a removed server of ``name`` in ``namespace`` left (None when none was removed)."""
    approved = await db.fetchval(
        "SELECT approved FROM mcp.retired_pins WHERE namespace = $1 AND server_name = $2", namespace, name
    )
    return dict(approved) if approved is not None else None


async def prompt_pins_left(db: Db, namespace: str, name: str) -> Left | None:
    """What a removed server of ``name`` in ``namespace`` left of its prompts (None when nothing)."""
    approved = await db.fetchval(
        "SELECT prompts FROM mcp.retired_pins WHERE namespace = $1 AND server_name = $2", namespace, name
    )
    return dict(approved) if approved is not None else None


async def instructions_left(db: Db, namespace: str, name: str) -> ApprovedText | None:
    """The approved instructions a removed server of ``name`` in ``namespace`` left (None when none)."""
    left = await db.fetchval(
        "SELECT instructions FROM mcp.retired_pins WHERE namespace = $1 AND server_name = $2", namespace, name
    )
    return ApprovedText(left["hash"], left["text"]) if left is not None else None


async def every_left(conn: Conn) -> EveryLeft:
    """What every removed server left to its name, and every name's approvals of flagged resource templates."""
    rows = await conn.fetch("SELECT namespace, server_name, approved, prompts, instructions FROM mcp.retired_pins")
    keys = [((r["namespace"], r["server_name"]), r) for r in rows]
    templates: dict[tuple[str, str], dict[str, str]] = {}
    for t in await conn.fetch("SELECT namespace, server_name, uri_template, approved_hash FROM mcp.template_approvals"):
        templates.setdefault((t["namespace"], t["server_name"]), {})[t["uri_template"]] = t["approved_hash"]
    return EveryLeft(
        {k: dict(r["approved"]) for k, r in keys if r["approved"] is not None},
        {k: dict(r["prompts"]) for k, r in keys if r["prompts"] is not None},
        {k: ApprovedText(r["instructions"]["hash"], r["instructions"]["text"]) for k, r in keys if r["instructions"]},
        templates,
    )
