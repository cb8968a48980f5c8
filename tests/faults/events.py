"""The event stream as the fault tests check it: every event read back, and the projection compared to it."""

from __future__ import annotations

import json
from typing import Any

from nats.js.errors import NotFoundError

from tests.harness import System
from toolmesh.contracts.events import (
    EVENTS_STREAM,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    ToolsDiscovered,
)
from toolmesh.platform.store.queries import applied_sequence


async def read_events(system: System) -> list[tuple[int, str, dict[str, Any]]]:
    """Every event in the stream: (sequence, subject, body)."""
    js = system.backends.js
    last = (await js.stream_info(EVENTS_STREAM)).state.last_seq
    events = []
    for seq in range(1, last + 1):
        try:
            msg = await js.get_msg(EVENTS_STREAM, seq)
        except NotFoundError:
            continue
        events.append((seq, msg.subject, json.loads(msg.data or b"{}")))
    return events


async def projection_mismatch(system: System) -> str | None:
    """None when the projector applied every event, the projected servers are those registered and not removed,
    and each one's projected status and tool count are those of its last events; else what differs."""
    events = await read_events(system)
    last_seq = events[-1][0] if events else 0
    applied = await applied_sequence(system.backends.db)
    if applied < last_seq:
        return f"projection at sequence {applied}, stream at {last_seq}"
    removed = {e["server_id"] for _, subject, e in events if subject == ServerRemoved.subject}
    registered = {e["server_id"] for _, subject, e in events if subject == ServerRegistered.subject} - removed
    statuses = {e["server_id"]: e["status"] for _, subject, e in events if subject == ServerStatusChanged.subject}
    tools = {e["server_id"]: len(e["tools"]) for _, subject, e in events if subject == ToolsDiscovered.subject}
    rows = await system.backends.db.fetch("SELECT id::text AS id, status, tool_count FROM mcp.external_servers")
    projected = {row["id"]: (row["status"], row["tool_count"]) for row in rows}
    if set(projected) != registered:
        return f"projected servers {sorted(projected)} but registered {sorted(registered)}"
    expected = {sid: (statuses.get(sid, "DISCONNECTED"), tools.get(sid, 0)) for sid in registered}
    differing = {sid: (projected[sid], expected[sid]) for sid in registered if projected[sid] != expected[sid]}
    return f"projected vs last events (status, tools): {differing}" if differing else None
