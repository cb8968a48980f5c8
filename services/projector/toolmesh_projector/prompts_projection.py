"""The projector's writes for a server's prompts: discovery (with pinning) and approvals, like tools
(``tools_projection``), by the functions of ``toolmesh.pinning`` with ``PROMPT_PARTS``."""

from __future__ import annotations

from toolmesh.contracts.events import PromptsApproved, PromptsDiscovered
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.pinning import PROMPT_PARTS, Pin, approvals, approve, inherit, prompt_definition_hash, review
from toolmesh.store.connections import Conn
from toolmesh.store.retired_pins import prompt_pins_left
from toolmesh_projector.projection_trail import audit, history


async def prompts_discovered(conn: Conn, event: PromptsDiscovered) -> None:
    """The server's prompts, replaced whole (nothing for a removed server); each prompt pinned or held
    for review, the first list against the prompt pins a removed server of the same name left."""
    server = await conn.fetchrow(
        "SELECT namespace, name, new_tools, prompts_seen FROM mcp.external_servers WHERE id = $1", event.server_id
    )
    if server is None:
        return
    listed = {p.original_name: prompt_definition_hash(p.item) for p in event.prompts}
    rows = await conn.fetch(
        "SELECT original_name, definition_hash, approved_hash FROM mcp.prompts WHERE server_id = $1", event.server_id
    )
    stored = ((r["original_name"], r["definition_hash"], r["approved_hash"]) for r in rows)
    first_list = not server["prompts_seen"]
    left = await prompt_pins_left(conn, server["namespace"], server["name"]) if first_list else None
    approved, first_list = inherit(approvals(stored, listed), first_list=first_list, left=left)
    policy = NewToolsPolicy(server["new_tools"])
    pins = review(listed.items(), approved, first_list=first_list, policy=policy, parts=PROMPT_PARTS)
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


def pin_columns(pin: Pin) -> tuple[str, str | None, str | None, list[str]]:
    """A pin as the columns ``definition_hash, approved_hash, held_reason, held_fields``."""
    hold = pin.hold
    return pin.definition_hash, pin.approved_hash, hold.reason if hold else None, hold.fields if hold else []


async def prompts_approved(conn: Conn, event: PromptsApproved) -> None:
    """Held prompt definitions approved: their pins move to the approved hash."""
    for prompt in event.prompts:
        row = await conn.fetchrow(
            "SELECT definition_hash, approved_hash FROM mcp.prompts WHERE server_id = $1 AND original_name = $2",
            event.server_id,
            prompt.original_name,
        )
        if row is None or row["definition_hash"] is None:
            continue  # a newer prompt list dropped it
        pin = approve(Pin(row["definition_hash"], row["approved_hash"]), prompt.definition_hash, PROMPT_PARTS)
        await conn.execute(
            "UPDATE mcp.prompts SET approved_hash = $3, held_reason = $4, held_fields = $5 "
            "WHERE server_id = $1 AND original_name = $2",
            event.server_id,
            prompt.original_name,
            *pin_columns(pin)[1:],
        )
    details = {"prompts": [p.model_dump() for p in event.prompts]}
    await history(conn, event, "PROMPTS_APPROVED", details)
    await audit(conn, event, event.server_name, details)
