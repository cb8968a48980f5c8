"""The gateway's in-memory view of servers and tools: routes calls and feeds the MCP front door.

It starts from a snapshot of the read model at a known stream sequence and then applies every
later event, with the projector's rules (a registration whose name is taken is dropped, tools of
an unknown server are ignored, a tool list is a full snapshot). Routing reads it as a
``RouteSource``; the front door reads servers with transports, tools with descriptions and input
schemas, and ``version``, which moves when the *visible* tool set (servers CONNECTED or DEGRADED)
changes, to announce ``notifications/tools/list_changed``. No I/O here: ``catalog_feed`` feeds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolmesh.contracts.events import Event, ServerRegistered, ServerRemoved, ServerStatusChanged, ToolsDiscovered
from toolmesh.lifecycle import SERVING, ServerStatus
from toolmesh.routing import ServerRoute


@dataclass(frozen=True, slots=True)
class CatalogServer(ServerRoute):
    """A registered server: what routing needs, plus its transport for ``proxy.list_servers()``."""

    transport: str

    @property
    def visible(self) -> bool:
        """True when its tools are listed and callable (CONNECTED, or DEGRADED with a warning)."""
        return self.status in SERVING


@dataclass(frozen=True, slots=True)
class CatalogTool:
    """One upstream tool: its original name, description and input schema."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] = field(default_factory=dict)


class Catalog:
    """Servers by id and name, their last tool lists, and which servers have a tool; implements ``RouteSource``."""

    def __init__(self) -> None:
        self._servers: dict[str, CatalogServer] = {}
        self._ids_by_name: dict[str, str] = {}
        self._tools: dict[str, dict[str, CatalogTool]] = {}
        self._servers_by_tool: dict[str, dict[str, None]] = {}  # original name -> server ids, in order
        self.applied_seq = 0
        self.version = 0

    # -- RouteSource -----------------------------------------------------------------------------

    def server(self, server_id: str) -> CatalogServer | None:
        """A server by id."""
        return self._servers.get(server_id)

    def server_named(self, name: str) -> CatalogServer | None:
        """A server by its registered name."""
        server_id = self._ids_by_name.get(name)
        return None if server_id is None else self._servers.get(server_id)

    def has_tool(self, server_id: str, original_name: str) -> bool:
        """True when the server's last tool list has ``original_name``."""
        return original_name in self._tools.get(server_id, {})

    def servers_with_tool(self, original_name: str) -> Sequence[CatalogServer]:
        """Every server whose tool list has ``original_name``."""
        ids = self._servers_by_tool.get(original_name)
        return [self._servers[i] for i in ids] if ids else []

    # -- the front door's reads ------------------------------------------------------------------

    def servers(self) -> list[CatalogServer]:
        """Every registered server, by name."""
        return sorted(self._servers.values(), key=lambda s: s.name)

    def tools_of(self, server_id: str) -> list[CatalogTool]:
        """The last discovered tools of a server, by name."""
        return sorted(self._tools.get(server_id, {}).values(), key=lambda t: t.name)

    def tool(self, server_id: str, name: str) -> CatalogTool | None:
        """One tool of a server by its original name."""
        return self._tools.get(server_id, {}).get(name)

    def visible(self) -> list[tuple[CatalogServer, CatalogTool]]:
        """Every tool of every CONNECTED or DEGRADED server, by server then tool name."""
        return [(s, t) for s in self.servers() if s.visible for t in self.tools_of(s.id)]

    # -- feeding ---------------------------------------------------------------------------------

    def load(
        self, servers: Iterable[CatalogServer], tools: Iterable[tuple[str, CatalogTool]], applied_seq: int
    ) -> None:
        """Replace everything with a snapshot: servers, ``(server_id, tool)`` pairs, and its sequence."""
        self._servers, self._ids_by_name, self._tools, self._servers_by_tool = {}, {}, {}, {}
        for server in servers:
            self._servers[server.id] = server
            self._ids_by_name[server.name] = server.id
        by_server: dict[str, dict[str, CatalogTool]] = {}
        for server_id, tool in tools:
            if server_id in self._servers:
                by_server.setdefault(server_id, {})[tool.name] = tool
        for server_id, listed in by_server.items():
            self._set_tools(server_id, listed)
        self.applied_seq = applied_seq
        self.version += 1

    def apply(self, event: Event, seq: int) -> bool:
        """Apply the event at stream sequence ``seq``; True when the visible tool set changed.

        A sequence already applied changes nothing (False).
        """
        if seq <= self.applied_seq:
            return False
        self.applied_seq = seq
        changed = self._apply(event)
        if changed:
            self.version += 1
        return changed

    def skip(self, seq: int) -> None:
        """Record a sequence that carried nothing for the catalog (an unknown or malformed event)."""
        self.applied_seq = max(self.applied_seq, seq)

    def _apply(self, event: Event) -> bool:
        current = self._servers.get(event.server_id)
        if isinstance(event, ServerRegistered):
            if current is None and event.name not in self._ids_by_name:
                transport = str(event.transport_type)
                self._servers[event.server_id] = CatalogServer(
                    event.server_id, event.name, ServerStatus.DISCONNECTED, transport
                )
                self._ids_by_name[event.name] = event.server_id
            return False
        if current is None:
            return False
        if isinstance(event, ServerStatusChanged):
            updated = CatalogServer(current.id, current.name, event.status, current.transport)
            self._servers[current.id] = updated
            return current.visible != updated.visible and bool(self._tools.get(current.id))
        if isinstance(event, ServerRemoved):
            del self._servers[current.id]
            if self._ids_by_name.get(current.name) == current.id:
                del self._ids_by_name[current.name]
            had_tools = bool(self._tools.get(current.id))
            self._set_tools(current.id, {})
            del self._tools[current.id]
            return current.visible and had_tools
        if isinstance(event, ToolsDiscovered):
            listed = {
                t.original_name: CatalogTool(t.original_name, t.description, dict(t.input_schema)) for t in event.tools
            }
            previous = self._set_tools(current.id, listed)
            return current.visible and listed != previous
        return False

    def _set_tools(self, server_id: str, listed: dict[str, CatalogTool]) -> dict[str, CatalogTool]:
        """Replace a server's tool list (and the by-name index); returns the previous list."""
        previous = self._tools.get(server_id, {})
        for gone in previous.keys() - listed.keys():
            holders = self._servers_by_tool.get(gone)
            if holders is not None:
                holders.pop(server_id, None)
                if not holders:
                    del self._servers_by_tool[gone]
        for new in listed.keys() - previous.keys():
            self._servers_by_tool.setdefault(new, {})[server_id] = None
        self._tools[server_id] = listed
        return previous
