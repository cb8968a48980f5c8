"""The gateway's in-memory view of servers and tools, for routing calls without the database.

It starts from a snapshot of the read model at a known stream sequence and then applies every
later event, with the projector's rules (a registration whose name is taken is dropped, tools of
an unknown server are ignored, a tool list is a full snapshot). No I/O here: ``route_feed`` feeds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from toolmesh.contracts.events import Event, ServerRegistered, ServerRemoved, ServerStatusChanged, ToolsDiscovered
from toolmesh.lifecycle import ServerStatus
from toolmesh.routing import ServerRoute


class RouteTable:
    """Servers by id and name, tools by server and by original name; implements ``RouteSource``."""

    def __init__(self) -> None:
        self._servers: dict[str, ServerRoute] = {}
        self._ids_by_name: dict[str, str] = {}
        self._tools: dict[str, frozenset[str]] = {}
        self._servers_by_tool: dict[str, dict[str, None]] = {}
        self.applied_seq = 0

    # -- RouteSource ---------------------------------------------------------------------------

    def server(self, server_id: str) -> ServerRoute | None:
        """A server by id."""
        return self._servers.get(server_id)

    def server_named(self, name: str) -> ServerRoute | None:
        """A server by its registered name."""
        server_id = self._ids_by_name.get(name)
        return None if server_id is None else self._servers.get(server_id)

    def has_tool(self, server_id: str, original_name: str) -> bool:
        """True when the server's last tool list has ``original_name``."""
        tools = self._tools.get(server_id)
        return tools is not None and original_name in tools

    def servers_with_tool(self, original_name: str) -> Sequence[ServerRoute]:
        """Every server whose tool list has ``original_name``."""
        ids = self._servers_by_tool.get(original_name)
        return [self._servers[i] for i in ids] if ids else []

    # -- feeding ---------------------------------------------------------------------------------

    def load(self, servers: Iterable[ServerRoute], tools: Iterable[tuple[str, str]], applied_seq: int) -> None:
        """Replace everything with a snapshot: servers, ``(server_id, original_name)`` pairs, its sequence."""
        self._servers, self._ids_by_name, self._tools, self._servers_by_tool = {}, {}, {}, {}
        for server in servers:
            self._add_server(server)
        by_server: dict[str, set[str]] = {}
        for server_id, original in tools:
            by_server.setdefault(server_id, set()).add(original)
        for server_id, names in by_server.items():
            if server_id in self._servers:
                self._set_tools(server_id, names)
        self.applied_seq = applied_seq

    def apply(self, event: Event, seq: int) -> bool:
        """Apply the event at stream sequence ``seq``; False when that sequence was already applied."""
        if seq <= self.applied_seq:
            return False
        self.applied_seq = seq
        if isinstance(event, ServerRegistered):
            if event.server_id not in self._servers and event.name not in self._ids_by_name:
                self._add_server(ServerRoute(event.server_id, event.name, ServerStatus.DISCONNECTED))
        elif isinstance(event, ServerStatusChanged):
            current = self._servers.get(event.server_id)
            if current is not None:
                self._servers[event.server_id] = ServerRoute(current.id, current.name, event.status)
        elif isinstance(event, ServerRemoved):
            self._remove_server(event.server_id)
        elif isinstance(event, ToolsDiscovered) and event.server_id in self._servers:
            self._set_tools(event.server_id, {t.original_name for t in event.tools})
        return True

    def skip(self, seq: int) -> None:
        """Record a sequence that carried nothing for routing (an unknown or malformed event)."""
        self.applied_seq = max(self.applied_seq, seq)

    def _add_server(self, server: ServerRoute) -> None:
        self._servers[server.id] = server
        self._ids_by_name[server.name] = server.id

    def _remove_server(self, server_id: str) -> None:
        server = self._servers.pop(server_id, None)
        if server is None:
            return
        if self._ids_by_name.get(server.name) == server_id:
            del self._ids_by_name[server.name]
        self._set_tools(server_id, set())
        self._tools.pop(server_id, None)

    def _set_tools(self, server_id: str, names: set[str]) -> None:
        previous = self._tools.get(server_id, frozenset())
        for gone in previous - names:
            holders = self._servers_by_tool.get(gone)
            if holders is not None:
                holders.pop(server_id, None)
                if not holders:
                    del self._servers_by_tool[gone]
        for new in names - previous:
            self._servers_by_tool.setdefault(new, {})[server_id] = None
        self._tools[server_id] = frozenset(names)
