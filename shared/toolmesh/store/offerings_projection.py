"""The projector's writes for what a server offers besides tools: its description (protocol,
capabilities, instructions), resources and resource templates (prompts: ``prompts_projection``)."""

from __future__ import annotations

from toolmesh.contracts.events import ResourcesDiscovered, ServerDescribed
from toolmesh.store.connections import Conn


async def server_described(conn: Conn, event: ServerDescribed) -> None:
    """The server's protocol version, capabilities, info and instructions."""
    await conn.execute(
        "UPDATE mcp.external_servers SET protocol_version = $2, capabilities = $3, server_info = $4, "
        "instructions = $5 WHERE id = $1",
        event.server_id,
        event.protocol_version,
        event.capabilities,
        event.server_info,
        event.instructions,
    )


async def resources_discovered(conn: Conn, event: ResourcesDiscovered) -> None:
    """The server's resources and templates, replaced whole (nothing for a removed server)."""
    if not await conn.fetchval("SELECT 1 FROM mcp.external_servers WHERE id = $1", event.server_id):
        return
    await conn.execute("DELETE FROM mcp.resources WHERE server_id = $1", event.server_id)
    await conn.execute("DELETE FROM mcp.resource_templates WHERE server_id = $1", event.server_id)
    await conn.executemany(
        "INSERT INTO mcp.resources(server_id, uri, name, description, mime_type, item, discovered_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7)",
        [
            (
                event.server_id,
                r.uri,
                r.item.get("name"),
                r.item.get("description"),
                r.item.get("mimeType"),
                r.item,
                event.occurred_at,
            )
            for r in event.resources
        ],
    )
    await conn.executemany(
        "INSERT INTO mcp.resource_templates(server_id, uri_template, name, description, item, discovered_at) "
        "VALUES ($1, $2, $3, $4, $5, $6)",
        [
            (event.server_id, t.uri_template, t.item.get("name"), t.item.get("description"), t.item, event.occurred_at)
            for t in event.templates
        ],
    )
