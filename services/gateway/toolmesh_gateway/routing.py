"""Routing of a tool call to one server (BR-005), as plain functions over a view of the registry.

Resolution order: an explicit ``server_id``; then a name with a dot is ``server.tool`` split on the
first dot (EC-002) and nothing else; then a name without a dot is the tool's original name when
exactly one server has it. A name with a dot is never looked up as a bare original name, whether a
server of its prefix exists or not: ``ghost.echo`` is server ``ghost``'s tool ``echo`` or not found,
never the tool another server lists as ``ghost.echo`` (that one is called ``raw.ghost.echo``, or by
its original name with ``server_id``), so registering or deleting ``ghost`` moves no call. The caller's view
(``RouteSource``) is in memory and holds only what the caller may see (its namespace); nothing
here does I/O. Only a pinned, approved definition is callable: a tool the server never listed is
not found (404, even with an explicit ``server_id``), one held back by pinning resolves, then
refuses (409).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from toolmesh.errors import ServerNotFound, ServerUnavailable, ToolAmbiguous, ToolChanged, ToolNotFound
from toolmesh.lifecycle import ServerStatus
from toolmesh.naming import DEFAULT_NAMESPACE
from toolmesh.pinning import Hold


class RoutingStrategy(StrEnum):
    """How a call found its server."""

    EXPLICIT_SERVER = "EXPLICIT_SERVER"
    NAMESPACE_RESOLVED = "NAMESPACE_RESOLVED"
    LOOKUP_RESOLVED = "LOOKUP_RESOLVED"


@dataclass(frozen=True, slots=True)
class ServerRoute:
    """What routing needs to know about a server."""

    id: str
    name: str
    status: ServerStatus
    namespace: str = DEFAULT_NAMESPACE

    def identity(self) -> dict[str, str]:
        """``{"id", "name", "status"}``, as error bodies show a server."""
        return {"id": self.id, "name": self.name, "status": str(self.status)}


@dataclass(frozen=True, slots=True)
class Route:
    """Where a call goes: the server and the tool's original (upstream) name."""

    server: ServerRoute
    tool: str
    strategy: RoutingStrategy


class RouteSource(Protocol):
    """A read-only view of servers and their tools."""

    def server(self, server_id: str) -> ServerRoute | None:
        """A server by id."""
        ...

    def servers_named(self, name: str) -> Sequence[ServerRoute]:
        """The servers registered under ``name`` (one per namespace the view spans)."""
        ...

    def has_tool(self, server_id: str, original_name: str) -> bool:
        """True when the server's last discovered tool list has ``original_name``."""
        ...

    def servers_with_tool(self, original_name: str) -> Sequence[ServerRoute]:
        """Every server whose tool list has ``original_name``."""
        ...

    def hold_of(self, server_id: str, original_name: str) -> Hold | None:
        """Why the tool is held back until an admin approves it, or None."""
        ...


def resolve_route(source: RouteSource, name: str, server_id: str | None = None) -> Route:
    """The route of a call to ``name`` (optionally on ``server_id``).

    Raises:
        ServerNotFound: ``server_id`` is unknown.
        ToolAmbiguous: several servers have the original name; ``context.servers`` lists them.
        ToolNotFound: no server has the tool.
        ToolChanged: the tool is held back until an admin approves its current definition.
    """
    route = _resolve(source, name, server_id)
    require_pinned(source, route.server, route.tool)
    return route


def require_pinned(source: RouteSource, server: ServerRoute, tool: str) -> None:
    """Refuse a call to anything but a pinned, approved definition of ``server``'s ``tool``.

    Raises:
        ToolNotFound: the server's discovered tool list does not have the tool (never forwarded).
        ToolChanged: the tool is held back until an admin approves its current definition.
    """
    if not source.has_tool(server.id, tool):
        raise ToolNotFound(f"Tool not found: {server.name}.{tool}", {"tool": tool, "server": server.name})
    hold = source.hold_of(server.id, tool)
    if hold is not None:
        what = {
            "new": "is new and waits for review",
            "flagged": f"was flagged by the poisoning scan ({'; '.join(hold.fields)})",
        }.get(hold.reason, f"changed its {' and '.join(hold.fields)}")
        raise ToolChanged(
            f"Tool {server.name}.{tool} {what}; an admin must approve it before it can be called",
            {
                "server": server.name,
                "server_id": server.id,
                "tool": tool,
                "reason": hold.reason,
                "fields": hold.fields,
            },
        )


def _resolve(source: RouteSource, name: str, server_id: str | None) -> Route:
    if server_id:
        server = source.server(server_id)
        if server is None:
            raise ServerNotFound(f"Server not found: {server_id}", {"server_id": server_id})
        return Route(server, _tool_on(source, server, name), RoutingStrategy.EXPLICIT_SERVER)
    server_name, dot, original = name.partition(".")
    if dot:
        servers = source.servers_named(server_name)
        named = [s for s in servers if source.has_tool(s.id, original)]
        if len(named) == 1:
            return Route(named[0], original, RoutingStrategy.NAMESPACE_RESOLVED)
        if named:
            raise _ambiguous(name, named)
        raise ToolNotFound(f"Tool not found: {name}", {"tool": name})
    candidates = source.servers_with_tool(name)
    if len(candidates) == 1:
        return Route(candidates[0], name, RoutingStrategy.LOOKUP_RESOLVED)
    if candidates:
        raise _ambiguous(name, candidates)
    raise ToolNotFound(f"Tool not found: {name}", {"tool": name})


def _ambiguous(name: str, servers: Sequence[ServerRoute]) -> ToolAmbiguous:
    listed = sorted(
        ({"id": s.id, "name": s.name, "namespace": s.namespace} for s in servers),
        key=lambda s: (s["name"], s["namespace"]),
    )
    return ToolAmbiguous(
        f"Tool '{name}' is provided by {len(servers)} servers; use a namespaced name or server_id",
        {"tool": name, "servers": listed},
    )


def _tool_on(source: RouteSource, server: ServerRoute, name: str) -> str:
    """The upstream name of ``name`` on a server given explicitly: original or namespaced (a name
    the server never listed stays as it is, and ``require_pinned`` refuses it)."""
    prefix = f"{server.name}."
    if not source.has_tool(server.id, name) and name.startswith(prefix):
        return name[len(prefix) :]
    return name


def serving_warning(server: ServerRoute) -> str | None:
    """None for a CONNECTED server, a warning for a DEGRADED one; ``ServerUnavailable`` otherwise."""
    if server.status is ServerStatus.CONNECTED:
        return None
    if server.status is ServerStatus.DEGRADED:
        return f"Server {server.name} is DEGRADED: the call was executed but may be slow or fail"
    raise ServerUnavailable(f"Server unavailable: {server.name}", server=server.identity())
