"""The pins of a server's tools and prompts in the read model, reviewed and approved one way for both.

Tools and prompts are pinned alike (``toolmesh.pinning``); they differ only in their table, the
column naming their server, the flag saying the server listed them once, the pins a removed server
of the same name left, the hash parts, and (tools only) an ``updated_at`` column. A ``PinnedTable``
says which: ``TOOLS`` or ``PROMPTS``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from asyncpg import Record

from toolmesh.contracts.events import ApprovedTool, PromptsApproved, ToolsApproved
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.pinning import PARTS, PROMPT_PARTS, Pin, approvals, approve, inherit, review
from toolmesh.platform.store.connections import Conn
from toolmesh.platform.store.retired_pins import Left, pins_left, prompt_pins_left
from toolmesh_projector.projection_trail import audit, history


@dataclass(frozen=True)
class PinnedTable:
    """Where and how one kind of a server's definitions (tools or prompts) is pinned."""

    noun: str  # "tools": the history kind (``TOOLS_APPROVED``) and the details key
    table: str
    server_column: str
    seen_column: str  # of mcp.external_servers: the server's first list was seen
    parts: tuple[str, ...]
    left: Callable[[Conn, str, str], Awaitable[Left | None]]
    stamp_column: str | None  # set to the event's time when a pin is approved


TOOLS = PinnedTable("tools", "mcp.tools", "source_server_id", "tools_seen", PARTS, pins_left, "updated_at")
PROMPTS = PinnedTable("prompts", "mcp.prompts", "server_id", "prompts_seen", PROMPT_PARTS, prompt_pins_left, None)


def pin_columns(pin: Pin) -> tuple[str, str | None, str | None, list[str]]:
    """A pin as the columns ``definition_hash, approved_hash, held_reason, held_fields``."""
    hold = pin.hold
    return pin.definition_hash, pin.approved_hash, hold.reason if hold else None, hold.fields if hold else []


async def listing_server(conn: Conn, kind: PinnedTable, server_id: str) -> Record | None:
    """The server's ``namespace, name, new_tools`` and whether its first list of ``kind`` was seen
    (None for a removed server)."""
    return await conn.fetchrow(
        f"SELECT namespace, name, new_tools, {kind.seen_column} FROM mcp.external_servers WHERE id = $1", server_id
    )


async def review_listed(
    conn: Conn,
    kind: PinnedTable,
    server_id: str,
    server: Record,
    listed: dict[str, str],
    flagged: dict[str, list[str]],
) -> dict[str, Pin]:
    """Each listed definition's pin (``listed``: definition hash by original name): its stored approval
    or, on the server's first list, the approval a removed server of the same name left; reviewed under
    the server's new-tools policy; ``flagged``: the poisoning scanner's findings by name."""
    rows = await conn.fetch(
        f"SELECT original_name, definition_hash, approved_hash FROM {kind.table} WHERE {kind.server_column} = $1",
        server_id,
    )
    stored = ((r["original_name"], r["definition_hash"], r["approved_hash"]) for r in rows)
    first_list = not server[kind.seen_column]
    left = await kind.left(conn, server["namespace"], server["name"]) if first_list else None
    approved, first_list = inherit(approvals(stored, listed), first_list=first_list, left=left)
    policy = NewToolsPolicy(server["new_tools"])
    return review(listed.items(), approved, first_list=first_list, policy=policy, parts=kind.parts, flagged=flagged)


async def pins_approved(
    conn: Conn, kind: PinnedTable, event: ToolsApproved | PromptsApproved, approved: list[ApprovedTool]
) -> None:
    """Held definitions approved: their pins move to the approved hash (one a newer list dropped is
    skipped); the approval goes to the server's history and the audit log."""
    stamp = f", {kind.stamp_column} = $6" if kind.stamp_column else ""
    for item in approved:
        row = await conn.fetchrow(
            f"SELECT definition_hash, approved_hash FROM {kind.table} "
            f"WHERE {kind.server_column} = $1 AND original_name = $2",
            event.server_id,
            item.original_name,
        )
        if row is None or row["definition_hash"] is None:
            continue  # a newer list dropped it
        pin = approve(Pin(row["definition_hash"], row["approved_hash"]), item.definition_hash, kind.parts)
        await conn.execute(
            f"UPDATE {kind.table} SET approved_hash = $3, held_reason = $4, held_fields = $5{stamp} "
            f"WHERE {kind.server_column} = $1 AND original_name = $2",
            event.server_id,
            item.original_name,
            *pin_columns(pin)[1:],
            *([event.occurred_at] if kind.stamp_column else []),
        )
    details = {kind.noun: [a.model_dump() for a in approved]}
    await history(conn, event, f"{kind.noun.upper()}_APPROVED", details)
    await audit(conn, event, event.server_name, details)
