"""What the MCP front door shows: servers (name, transport, status) and their tools' definitions.

A second in-memory view of the event stream next to the route table: routing needs names and
statuses, the front door also needs descriptions and input schemas, transports for
``proxy.list_servers()``, and to know when the *visible* tool set changes (servers CONNECTED or
DEGRADED), to announce ``notifications/tools/list_changed``. No I/O here: ``catalog_feed`` feeds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toolmesh.contracts.events import Event, ServerRegistered, ServerRemoved, ServerStatusChanged, ToolsDiscovered
from toolmesh.lifecycle import SERVING, ServerStatus


@dataclass(frozen=True, slots=True)
class CatalogServer:
    """A registered server as the front door shows it."""

    id: str
    name: str
    transport: str
    status: ServerStatus

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
    """Servers by id and name and their last tool lists; ``version`` moves when the visible set changes."""

    def __init__(self) -> None:
        self._servers: dict[str, CatalogServer] = {}
        self._ids_by_name: dict[str, str] = {}
        self._tools: dict[str, dict[str, CatalogTool]] = {}
        self.applied_seq = 0
        self.version = 0

    # -- reading -------------------------------------------------------------------------------

    def servers(self) -> list[CatalogServer]:
        """Every registered server, by name."""
        return sorted(self._servers.values(), key=lambda s: s.name)

    def server_named(self, name: str) -> CatalogServer | None:
        """A server by its registered name."""
        server_id = self._ids_by_name.get(name)
        return None if server_id is None else self._servers.get(server_id)

    def tools_of(self, server_id: str) -> list[CatalogTool]:
        """The last discovered tools of a server, by name."""
        return sorted(self._tools.get(server_id, {}).values(), key=lambda t: t.name)

    def tool(self, server_id: str, name: str) -> CatalogTool | None:
        """One tool of a server by its original name."""
        return self._tools.get(server_id, {}).get(name)

    def visible(self) -> list[tuple[CatalogServer, CatalogTool]]:
        """Every tool of every CONNECTED or DEGRADED server, by server then tool name."""
        return [(s, t) for s in self.servers() if s.visible for t in self.tools_of(s.id)]

    # -- feeding -------------------------------------------------------------------------------

    def load(
        self, servers: Iterable[CatalogServer], tools: Iterable[tuple[str, CatalogTool]], applied_seq: int
    ) -> None:
        """Replace everything with a snapshot: servers, ``(server_id, tool)`` pairs, and its sequence."""
        self._servers = {s.id: s for s in servers}
        self._ids_by_name = {s.name: s.id for s in self._servers.values()}
        self._tools = {}
        for server_id, tool in tools:
            if server_id in self._servers:
                self._tools.setdefault(server_id, {})[tool.name] = tool
        self.applied_seq = applied_seq
        self.version += 1

    def apply(self, event: Event, seq: int) -> bool:
        """Apply the event at stream sequence ``seq``; True when the visible tool set changed."""
        if seq <= self.applied_seq:
            return False
        self.applied_seq = seq
        changed = self._apply(event)
        if changed:
            self.version += 1
        return changed

    def skip(self, seq: int) -> None:
        """Record a sequence that carried nothing for the catalog."""
        self.applied_seq = max(self.applied_seq, seq)

    def _apply(self, event: Event) -> bool:
        current = self._servers.get(event.server_id)
        if isinstance(event, ServerRegistered):
            if current is None and event.name not in self._ids_by_name:
                server = CatalogServer(
                    event.server_id, event.name, str(event.transport_type), ServerStatus.DISCONNECTED
                )
                self._servers[server.id] = server
                self._ids_by_name[server.name] = server.id
            return False
        if current is None:
            return False
        if isinstance(event, ServerStatusChanged):
            updated = CatalogServer(current.id, current.name, current.transport, event.status)
            self._servers[current.id] = updated
            return current.visible != updated.visible and bool(self._tools.get(current.id))
        if isinstance(event, ServerRemoved):
            del self._servers[current.id]
            if self._ids_by_name.get(current.name) == current.id:
                del self._ids_by_name[current.name]
            return current.visible and bool(self._tools.pop(current.id, None))
        if isinstance(event, ToolsDiscovered):
            tools = {
                t.original_name: CatalogTool(t.original_name, t.description, dict(t.input_schema)) for t in event.tools
            }
            previous = self._tools.get(current.id, {})
            self._tools[current.id] = tools
            return current.visible and tools != previous
        return False
