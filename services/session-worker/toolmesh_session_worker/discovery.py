"""Turning an upstream ``tools/list`` into the snapshot event of one server."""

from __future__ import annotations

import logging

from mcp import types as mcp_types

from toolmesh.contracts.events import DiscoveredTool, ToolsDiscovered

log = logging.getLogger("toolmesh.discovery")


def tools_snapshot(server_id: str, server_name: str, tools: list[mcp_types.Tool], limit: int) -> ToolsDiscovered:
    """The ``tools.discovered`` event for a full tool list (duplicates keep the last, BR-003)."""
    by_name: dict[str, DiscoveredTool] = {}
    for tool in tools:
        by_name[tool.name] = DiscoveredTool(
            original_name=tool.name, description=tool.description, input_schema=dict(tool.input_schema or {})
        )
    found = list(by_name.values())
    if not found:
        log.warning("server %s returned an empty tool list", server_name, extra={"server": server_name})
    if len(found) > limit:
        log.warning(
            "server %s has %d tools; keeping the first %d (max tools per server)",
            server_name,
            len(found),
            limit,
            extra={"server": server_name},
        )
        found = found[:limit]
    return ToolsDiscovered(server_id=server_id, server_name=server_name, tools=found)
