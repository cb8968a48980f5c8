"""The projector's writes for a server's prompts: discovery (with pinning) and approvals, like tools
(``tools_projection``), through ``pinned_rows`` with ``PROMPTS``."""

from __future__ import annotations

from toolmesh.contracts.events import PromptsApproved, PromptsDiscovered
from toolmesh.pinning import prompt_definition_hash
from toolmesh.platform.store.connections import Conn
from toolmesh.poisoning.holds import flagged_prompts
from toolmesh_projector.pinned_rows import PROMPTS, listing_server, pin_columns, pins_approved, review_listed
from toolmesh_projector.projection_trail import history


async def prompts_discovered(conn: Conn, event: PromptsDiscovered) -> None:
    """The server's prompts, replaced whole (nothing for a removed server); each prompt pinned or held
    for review, the first list against the prompt pins a removed server of the same name left."""
    server = await listing_server(conn, PROMPTS, event.server_id)
    if server is None:
        return
    listed = {p.original_name: prompt_definition_hash(p.item) for p in event.prompts}
    flagged = flagged_prompts({p.original_name: p.item for p in event.prompts})
    pins = await review_listed(conn, PROMPTS, event.server_id, server, listed, flagged)
    await conn.execute("DELETE FROM mcp.prompts WHERE server_id = $1", event.server_id)
    await conn.executemany(
        "INSERT INTO mcp.prompts(server_id, original_name, description, arguments, item, discovered_at, "
        "definition_hash, approved_hash, held_reason, held_fields) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        [
            (
                event.server_id,
                p.original_name,
                p.item.get("description"),
                p.item.get("arguments") or [],
                p.item,
                event.occurred_at,
                *pin_columns(pins[p.original_name]),
            )
            for p in event.prompts
        ],
    )
    await conn.execute("UPDATE mcp.external_servers SET prompts_seen = TRUE WHERE id = $1", event.server_id)
    held = sorted(name for name, pin in pins.items() if pin.hold is not None)
    if held:
        await history(conn, event, "PROMPTS_HELD", {"prompt_count": len(pins), "held": held})


async def prompts_approved(conn: Conn, event: PromptsApproved) -> None:
    """Held prompt definitions approved: their pins move to the approved hash."""
    await pins_approved(conn, PROMPTS, event, event.prompts)
