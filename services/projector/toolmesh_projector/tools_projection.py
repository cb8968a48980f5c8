"""The projector's writes for a server's tools: discovery (with pinning), changes, approvals and
classification."""

from __future__ import annotations

from typing import Any

from toolmesh.contracts.events import ToolsApproved, ToolsChanged, ToolsClassified, ToolsDiscovered, ToolsUnclassified
from toolmesh.naming import namespace_tool
from toolmesh.pinning import Pin, definition_hash
from toolmesh.platform.store.connections import Conn
from toolmesh.poisoning.holds import flagged_tools
from toolmesh_projector.pinned_rows import TOOLS, listing_server, pin_columns, pins_approved, review_listed
from toolmesh_projector.projection_trail import audit, history


async def tools_discovered(conn: Conn, event: ToolsDiscovered) -> None:
    """The server's tool list, replaced whole; each tool pinned or held for review (``toolmesh.pinning``),
    the first list against the pins a removed server of the same name left."""
    server = await listing_server(conn, TOOLS, event.server_id)
    if server is None:
        return
    listed = {t.original_name: definition_hash(t) for t in event.tools}
    pins = await review_listed(conn, TOOLS, event.server_id, server, listed, flagged_tools(event.tools))
    names = await _replace_tools(conn, server["namespace"], event, pins)
    await conn.execute(
        "UPDATE mcp.external_servers SET tool_count = $2, updated_at = $3, tools_seen = TRUE WHERE id = $1",
        event.server_id,
        len(names),
        event.occurred_at,
    )
    held = sorted(name for name, pin in pins.items() if pin.hold is not None)
    details: dict[str, Any] = {"tool_count": len(names), **({"held": held} if held else {})}
    if event.left_out:
        details["left_out"] = event.left_out  # definitions discovery refused (``toolmesh.tool_definitions``)
    await history(conn, event, "TOOLS_DISCOVERED", details)


async def _replace_tools(conn: Conn, namespace: str, event: ToolsDiscovered, pins: dict[str, Pin]) -> list[str]:
    """Delete the server's tools that are no longer listed and upsert the listed ones with their pins; their
    namespaced names."""
    names = [namespace_tool(event.server_name, t.original_name) for t in event.tools]
    await conn.execute(
        "DELETE FROM mcp.tools WHERE source_server_id = $1 AND NOT (original_name = ANY($2::text[]))",
        event.server_id,
        [t.original_name for t in event.tools],
    )
    await conn.executemany(
        "INSERT INTO mcp.tools(name, original_name, description, input_schema, source_server_id, is_external, "
        "is_classified, discovered_at, updated_at, namespace, definition_hash, approved_hash, held_reason, "
        "held_fields, category, title, annotations, output_schema, icons, task_support) "
        "VALUES ($1, $2, $3, $4, $5, TRUE, FALSE, $6, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) "
        "ON CONFLICT (source_server_id, original_name) DO UPDATE SET name = EXCLUDED.name, "
        "description = EXCLUDED.description, input_schema = EXCLUDED.input_schema, updated_at = EXCLUDED.updated_at, "
        "category = EXCLUDED.category, title = EXCLUDED.title, annotations = EXCLUDED.annotations, "
        "output_schema = EXCLUDED.output_schema, icons = EXCLUDED.icons, task_support = EXCLUDED.task_support, "
        "definition_hash = EXCLUDED.definition_hash, approved_hash = EXCLUDED.approved_hash, "
        "held_reason = EXCLUDED.held_reason, held_fields = EXCLUDED.held_fields, "
        "is_classified = mcp.tools.is_classified AND mcp.tools.description IS NOT DISTINCT FROM EXCLUDED.description, "
        "classification_status = CASE WHEN mcp.tools.description IS NOT DISTINCT FROM EXCLUDED.description "
        "  THEN mcp.tools.classification_status ELSE 'DISCOVERED' END",
        [
            (
                name,
                t.original_name,
                t.description,
                t.input_schema,
                event.server_id,
                event.occurred_at,
                namespace,
                *pin_columns(pins[t.original_name]),
                str(t.category),
                t.title,
                t.annotations,
                t.output_schema,
                t.icons,
                t.task_support,
            )
            for name, t in zip(names, event.tools, strict=True)
        ],
    )
    return names


async def tools_changed(conn: Conn, event: ToolsChanged) -> None:
    """A changed tool list, in the history and the audit log."""
    details = {"changes": [c.model_dump(exclude={"description"}) for c in event.changes]}
    await history(conn, event, "TOOLS_CHANGED", details)
    await audit(conn, event, event.server_name, details)


async def tools_approved(conn: Conn, event: ToolsApproved) -> None:
    """Held tool definitions approved: their pins move to the approved hash."""
    await pins_approved(conn, TOOLS, event, event.tools)


async def tools_classified(conn: Conn, event: ToolsClassified) -> None:
    """The skills the classifier gave each tool."""
    await conn.executemany(
        "UPDATE mcp.tools SET skill_ids = $3, primary_skill_id = $4, is_classified = TRUE, updated_at = $5, "
        "classification_status = 'CLASSIFIED', classification_error = NULL "
        "WHERE source_server_id = $1 AND name = $2",
        [
            (
                event.server_id,
                namespace_tool(event.server_name, t.original_name),
                [s.skill_id for s in t.skills],
                t.primary_skill_id,
                event.occurred_at,
            )
            for t in event.tools
        ],
    )


async def tools_unclassified(conn: Conn, event: ToolsUnclassified) -> None:
    """Tools the classifier gave up on, with its error."""
    await conn.execute(
        "UPDATE mcp.tools SET classification_status = 'UNCLASSIFIED', classification_error = $3, updated_at = $4 "
        "WHERE source_server_id = $1 AND original_name = ANY($2::text[]) AND NOT is_classified",
        event.server_id,
        event.tools,
        event.error,
        event.occurred_at,
    )
    await history(conn, event, "CLASSIFICATION_FAILED", {"tools": event.tools, "attempts": event.attempts})
