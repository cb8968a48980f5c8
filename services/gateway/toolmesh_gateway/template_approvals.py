"""Resource templates the poisoning scanner flags, as an admin reviews them: each listed template's
definition hash and whether it is held (read from the read model), and their approval
(``TemplatesApproved``), the way held tools and prompts are approved (``ServerCommands.approve_held``).
Approvals stay with the server's name: a server registered again under it keeps them."""

from __future__ import annotations

from typing import Any

import asyncpg

from toolmesh.contracts.events import TemplatesApproved
from toolmesh.contracts.resources import ApproveTemplatesResponse
from toolmesh.errors import ResourceNotFound
from toolmesh.pinning import template_definition_hash
from toolmesh.platform.store import queries
from toolmesh.poisoning.holds import held_templates
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.server_commands import Held, ServerCommands


async def template_holds(db: asyncpg.Pool, server_id: str) -> dict[str, list[str]]:
    """The server's held templates (flagged and not approved), with the scanner's findings, by URI template."""
    server = await queries.get_server(db, server_id)
    _, rows = await queries.list_resources(db, server_id)
    if server is None or not rows:
        return {}
    approved = await queries.template_approvals(db, server["namespace"], server["name"])
    return held_templates({r["uri_template"]: r["item"] for r in rows}, approved)


async def template_pins(db: asyncpg.Pool, server_id: str) -> list[dict[str, Any]]:
    """Each listed template of the server with its ``definition_hash`` and ``held_reason`` (``flagged``
    while held, else None), by ``original_name`` (its URI template): what ``approve_held`` reads."""
    _, rows = await queries.list_resources(db, server_id)
    held = await template_holds(db, server_id)
    return [
        {
            "original_name": r["uri_template"],
            "definition_hash": template_definition_hash(r["item"]),
            "held_reason": "flagged" if r["uri_template"] in held else None,
        }
        for r in rows
    ]


TEMPLATES = Held("templates", template_pins, ResourceNotFound, TemplatesApproved)


async def approve_templates(
    commands: ServerCommands, server_id: str, templates: list[str] | None, caller: Caller
) -> ApproveTemplatesResponse:
    """Approve the current definitions of held templates (every held one when ``templates`` is None)."""
    approved = await commands.approve_held(TEMPLATES, server_id, templates, caller)
    return ApproveTemplatesResponse(server_id=server_id, approved=approved)
