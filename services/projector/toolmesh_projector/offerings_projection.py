"""The projector's writes for what a server offers besides tools: its description (protocol,
capabilities, instructions, with the approved instructions and their approval), resources and
resource templates with the approvals of flagged templates (prompts: ``prompts_projection``)."""

from __future__ import annotations

from asyncpg import Record

from toolmesh.contracts.events import InstructionsApproved, ResourcesDiscovered, ServerDescribed, TemplatesApproved
from toolmesh.pinning import ApprovedText, approve_instructions, pin_instructions
from toolmesh.platform.store.connections import Conn
from toolmesh.platform.store.retired_pins import instructions_left
from toolmesh.poisoning.holds import flagged_instructions, flagged_resources
from toolmesh_projector.projection_trail import audit, history


async def server_described(conn: Conn, event: ServerDescribed) -> None:
    """The server's protocol version, capabilities, info and instructions, with its approved
    instructions (``toolmesh.pinning.pin_instructions``; the first description of a server against
    what a removed server of the same name left)."""
    row = await conn.fetchrow(
        "SELECT namespace, name, instructions_hash, approved_instructions FROM mcp.external_servers WHERE id = $1",
        event.server_id,
    )
    if row is None:
        return
    approved = _approved(row) or await instructions_left(conn, row["namespace"], row["name"])
    findings = flagged_instructions(event.instructions)
    pinned = pin_instructions(event.instructions, approved, bool(findings))
    await conn.execute(
        "UPDATE mcp.external_servers SET protocol_version = $2, capabilities = $3, server_info = $4, "
        "instructions = $5, instructions_hash = $6, approved_instructions = $7, modern_versions = $8, "
        "modern_only = $9, modern_tasks = $10 WHERE id = $1",
        event.server_id,
        event.protocol_version,
        event.capabilities,
        event.server_info,
        event.instructions,
        pinned.hash,
        pinned.text,
        event.modern_versions,
        event.modern_only,
        event.modern_tasks,
    )
    if pinned.text != event.instructions:
        held = {"approved_hash": pinned.hash, **({"reason": "flagged", "findings": list(findings)} if findings else {})}
        await history(conn, event, "INSTRUCTIONS_HELD", held)


def _approved(row: Record) -> ApprovedText | None:
    return ApprovedText(row["instructions_hash"], row["approved_instructions"]) if row["instructions_hash"] else None


async def instructions_approved(conn: Conn, event: InstructionsApproved) -> None:
    """A server's current instructions approved: they are served from now on."""
    row = await conn.fetchrow(
        "SELECT instructions, instructions_hash, approved_instructions FROM mcp.external_servers WHERE id = $1",
        event.server_id,
    )
    if row is None:
        return
    approved = approve_instructions(row["instructions"], _approved(row), event.definition_hash)
    if approved is not None:
        await conn.execute(
            "UPDATE mcp.external_servers SET instructions_hash = $2, approved_instructions = $3 WHERE id = $1",
            event.server_id,
            approved.hash,
            approved.text,
        )
    details = {"definition_hash": event.definition_hash}
    await history(conn, event, "INSTRUCTIONS_APPROVED", details)
    await audit(conn, event, event.server_name, details)


async def resources_discovered(conn: Conn, event: ResourcesDiscovered) -> None:
    """The server's resources and templates, replaced whole (nothing for a removed server); fixed resources
    the poisoning scanner flags are noted in the server's history (they are listed still: docs/poisoning.md)."""
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
    flagged = flagged_resources({r.uri: r.item for r in event.resources})
    if flagged:
        await history(conn, event, "RESOURCES_FLAGGED", {"resources": flagged})


async def templates_approved(conn: Conn, event: TemplatesApproved) -> None:
    """Flagged resource templates approved: each URI template's approved hash, kept by the server's name
    (a removed server's approvals stay with it); the approval goes to the history and the audit log."""
    await conn.executemany(
        "INSERT INTO mcp.template_approvals(namespace, server_name, uri_template, approved_hash) "
        "VALUES ($1, $2, $3, $4) ON CONFLICT (namespace, server_name, uri_template) "
        "DO UPDATE SET approved_hash = EXCLUDED.approved_hash",
        [(event.namespace, event.server_name, t.original_name, t.definition_hash) for t in event.templates],
    )
    details = {"templates": [t.model_dump() for t in event.templates]}
    await history(conn, event, "TEMPLATES_APPROVED", details)
    await audit(conn, event, event.server_name, details)
