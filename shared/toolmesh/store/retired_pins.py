"""Pins a removed server leaves to its name in its namespace (``mcp.retired_pins``).

The projector writes them when it removes a server whose tool list was seen; discovery of the
next server registered under that name reviews its first tool list against them
(``toolmesh.pinning.inherit``), so removing and registering a server again approves nothing.
"""

from __future__ import annotations

from toolmesh.pinning import Pin, retired
from toolmesh.store.connections import Conn, Db

Left = dict[str, str | None]
"""Approved hash (or None) by original tool name."""


async def retire_pins(conn: Conn, server_id: str) -> None:
    """Keep the pins of a server about to be removed under its (namespace, name)."""
    server = await conn.fetchrow(
        "SELECT namespace, name, tools_seen FROM mcp.external_servers WHERE id = $1", server_id
    )
    if server is None or not server["tools_seen"]:
        return  # nothing was pinned: what an earlier server of the name left stays
    rows = await conn.fetch(
        "SELECT original_name, definition_hash, approved_hash FROM mcp.tools "
        "WHERE source_server_id = $1 AND original_name IS NOT NULL",
        server_id,
    )
    left = retired(
        (r["original_name"], Pin(r["definition_hash"], r["approved_hash"]) if r["definition_hash"] else None)
        for r in rows
    )
    await conn.execute(
        "INSERT INTO mcp.retired_pins(namespace, server_name, approved) VALUES ($1, $2, $3) "
        "ON CONFLICT (namespace, server_name) DO UPDATE SET approved = EXCLUDED.approved",
        server["namespace"],
        server["name"],
        left,
    )


async def pins_left(db: Db, namespace: str, name: str) -> Left | None:
    """What a removed server of ``name`` in ``namespace`` left (None when none was removed)."""
    approved = await db.fetchval(
        "SELECT approved FROM mcp.retired_pins WHERE namespace = $1 AND server_name = $2", namespace, name
    )
    return dict(approved) if approved is not None else None


async def every_left(conn: Conn) -> dict[tuple[str, str], Left]:
    """Every name's retired pins, by (namespace, server name)."""
    rows = await conn.fetch("SELECT namespace, server_name, approved FROM mcp.retired_pins")
    return {(r["namespace"], r["server_name"]): dict(r["approved"]) for r in rows}
