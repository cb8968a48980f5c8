"""The gateway's in-memory view of servers and tools: routes calls and feeds the MCP front door.

It starts from a snapshot of the read model at a known stream sequence and then applies every
later event, with the projector's rules (a registration whose name is taken in its namespace is
dropped, tools of an unknown server are ignored, a tool list is a full snapshot, tool definitions
are pinned by ``toolmesh.pinning``). Callers read it through a ``CatalogView`` of one namespace
(or of every namespace, for the owner), which is the ``RouteSource`` of routing and what the
front door lists. ``version`` moves when the *visible* tool set (tools of CONNECTED or DEGRADED
servers that are not held back) changes, to announce ``notifications/tools/list_changed``;
``resources_version`` and ``prompts_version`` do the same for resources (and templates) and prompts.
Each server's ``ServerOffer`` (``offers``) holds its own description and lists for ``/mcp/{server}``.
No I/O here: ``catalog_feed`` feeds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from toolmesh.categories import ToolCategory
from toolmesh.contracts.endpoints import ToolOverride
from toolmesh.contracts.events import (
    EndpointDeleted,
    EndpointSaved,
    Event,
    PromptsDiscovered,
    ResourcesDiscovered,
    ServerDescribed,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    ToolsApproved,
    ToolsDiscovered,
)
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.lifecycle import SERVING, ServerStatus
from toolmesh.pinning import Hold, Pin, approve, definition_hash, review
from toolmesh.routing import ServerRoute
from toolmesh_gateway.bundles import Bundle
from toolmesh_gateway.offers import ServerDescription, ServerOffer, serving_server, template_owner


@dataclass(frozen=True, slots=True)
class CatalogServer(ServerRoute):
    """A registered server: what routing needs, plus its transport and its new-tools policy."""

    transport: str = "STDIO"
    new_tools: NewToolsPolicy = NewToolsPolicy.AUTO

    @property
    def visible(self) -> bool:
        """True when its tools are listed and callable (CONNECTED, or DEGRADED with a warning)."""
        return self.status in SERVING


@dataclass(frozen=True, slots=True)
class CatalogTool:
    """One upstream tool: its original name, description, input schema, pin and category."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] = field(default_factory=dict)
    pin: Pin | None = None
    category: ToolCategory = ToolCategory.GENERAL

    @property
    def hold(self) -> Hold | None:
        """Why the tool is held back from clients, or None."""
        return self.pin.hold if self.pin is not None else None


class Catalog:
    """Servers by id and by (namespace, name), their last tool lists, and which servers have a tool."""

    def __init__(self) -> None:
        self._servers: dict[str, CatalogServer] = {}
        self._ids_by_name: dict[tuple[str, str], str] = {}
        self._tools: dict[str, dict[str, CatalogTool]] = {}  # a key exists once a tool list was seen
        self._servers_by_tool: dict[str, dict[str, None]] = {}  # original name -> server ids, in order
        self._held: dict[str, int] = {}  # server id -> how many of its tools are held back
        self._offers: dict[str, ServerOffer] = {}
        self._bundles: dict[tuple[str, str], Bundle] = {}  # (namespace, name) -> endpoint
        self.applied_seq = 0
        self.version = 0
        self.resources_version = 0
        self.prompts_version = 0

    def view(self, namespace: str | None) -> CatalogView:
        """What a caller of ``namespace`` sees (None: every namespace, for the owner)."""
        return CatalogView(self, namespace)

    def server(self, server_id: str) -> CatalogServer | None:
        """A server by id, in any namespace."""
        return self._servers.get(server_id)

    def tools_of(self, server_id: str) -> list[CatalogTool]:
        """The last discovered tools of a server (held ones included), by name."""
        return sorted(self._tools.get(server_id, {}).values(), key=lambda t: t.name)

    def tool(self, server_id: str, name: str) -> CatalogTool | None:
        """One tool of a server by its original name."""
        return self._tools.get(server_id, {}).get(name)

    def bundle(self, namespace: str, name: str) -> Bundle | None:
        """The endpoint (bundle) of that name in a namespace."""
        return self._bundles.get((namespace, name))

    def offer(self, server_id: str) -> ServerOffer:
        """A server's description, resources, templates and prompts (empty when unknown)."""
        return self._offers.get(server_id) or ServerOffer()

    # -- feeding ---------------------------------------------------------------------------------

    def load(
        self,
        servers: Iterable[CatalogServer],
        tools: Iterable[tuple[str, CatalogTool]],
        applied_seq: int,
        *,
        seen: Iterable[str] = (),
        offers: dict[str, ServerOffer] | None = None,
        bundles: Iterable[Bundle] = (),
    ) -> None:
        """Replace everything with a snapshot: servers, ``(server_id, tool)`` pairs, the servers whose
        tool list was seen (even if empty), offers by server id, endpoints, and the snapshot's sequence."""
        self._servers, self._ids_by_name, self._tools, self._servers_by_tool, self._held = {}, {}, {}, {}, {}
        for server in servers:
            self._servers[server.id] = server
            self._ids_by_name[(server.namespace, server.name)] = server.id
        by_server: dict[str, dict[str, CatalogTool]] = {s: {} for s in seen if s in self._servers}
        for server_id, tool in tools:
            if server_id in self._servers:
                by_server.setdefault(server_id, {})[tool.name] = tool
        for server_id, listed in by_server.items():
            self._set_tools(server_id, listed)
        self._offers = {k: v for k, v in (offers or {}).items() if k in self._servers}
        self._bundles = {(b.namespace, b.name): b for b in bundles}
        self.applied_seq = applied_seq
        self.version += 1
        self.resources_version += 1
        self.prompts_version += 1

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
        if isinstance(event, EndpointSaved | EndpointDeleted):
            return self._apply_bundle(event)
        current = self._servers.get(event.server_id) if event.server_id else None
        if isinstance(event, ServerRegistered):
            key = (event.namespace, event.name)
            if current is None and key not in self._ids_by_name:
                self._servers[event.server_id] = CatalogServer(
                    event.server_id,
                    event.name,
                    ServerStatus.DISCONNECTED,
                    event.namespace,
                    str(event.transport_type),
                    event.new_tools,
                )
                self._ids_by_name[key] = event.server_id
            return False
        if current is None:
            return False
        if isinstance(event, ServerStatusChanged):
            updated = replace(current, status=event.status)
            self._servers[current.id] = updated
            if current.visible != updated.visible:
                self._offer_changed(current.id)
            return current.visible != updated.visible and bool(self._tools.get(current.id))
        if isinstance(event, ServerDescribed | ResourcesDiscovered | PromptsDiscovered):
            self._apply_offer(current, event)
            return False
        if isinstance(event, ServerRemoved):
            if current.visible:
                self._offer_changed(current.id)
            self._offers.pop(current.id, None)
            del self._servers[current.id]
            if self._ids_by_name.get((current.namespace, current.name)) == current.id:
                del self._ids_by_name[(current.namespace, current.name)]
            had_tools = any(t.hold is None for t in self._tools.get(current.id, {}).values())
            self._set_tools(current.id, {})
            del self._tools[current.id]
            return current.visible and had_tools
        if isinstance(event, ToolsDiscovered):
            return self._tools_discovered(current, event)
        if isinstance(event, ToolsApproved):
            return self._tools_approved(current, event)
        return False

    def _tools_discovered(self, server: CatalogServer, event: ToolsDiscovered) -> bool:
        previous = self._tools.get(server.id)
        approved = {t.name: (t.pin.approved_hash if t.pin else None) for t in (previous or {}).values()}
        hashes = {t.original_name: definition_hash(t.description, t.input_schema) for t in event.tools}
        pins = review(hashes.items(), approved, first_list=previous is None, policy=server.new_tools)
        listed = {
            t.original_name: CatalogTool(
                t.original_name, t.description, dict(t.input_schema), pins[t.original_name], t.category
            )
            for t in event.tools
        }
        self._set_tools(server.id, listed)
        return server.visible and _shown(listed) != _shown(previous or {})

    def _tools_approved(self, server: CatalogServer, event: ToolsApproved) -> bool:
        tools = self._tools.get(server.id, {})
        before = _shown(tools)
        for approval in event.tools:
            tool = tools.get(approval.original_name)
            if tool is not None and tool.pin is not None:
                tools[tool.name] = replace(tool, pin=approve(tool.pin, approval.definition_hash))
        self._count_held(server.id)
        return server.visible and _shown(tools) != before

    def _apply_bundle(self, event: EndpointSaved | EndpointDeleted) -> bool:
        """An endpoint changed: every list of its clients may have changed (announced as list_changed)."""
        for key, known in list(self._bundles.items()):
            if known.id == event.endpoint_id:
                del self._bundles[key]
        if isinstance(event, EndpointSaved):
            key = (event.namespace, event.name)
            if key in self._bundles:
                return False  # the name is taken (the projector drops it too)
            self._bundles[key] = Bundle.of(
                event.endpoint_id,
                event.name,
                event.namespace,
                event.include,
                event.exclude,
                event.overrides,
                event.description,
            )
        self.resources_version += 1
        self.prompts_version += 1
        return True

    def _apply_offer(self, server: CatalogServer, event: Event) -> None:
        offer = self._offers.setdefault(server.id, ServerOffer())
        if isinstance(event, ServerDescribed):
            offer.description = ServerDescription(
                event.protocol_version, dict(event.capabilities), dict(event.server_info), event.instructions
            )
        elif isinstance(event, ResourcesDiscovered):
            resources = {r.uri: r.item for r in event.resources}
            templates = {t.uri_template: t.item for t in event.templates}
            changed = (resources, templates) != (offer.resources, offer.templates)
            offer.resources, offer.templates = resources, templates
            if changed and server.visible:
                self.resources_version += 1
        elif isinstance(event, PromptsDiscovered):
            prompts = {p.original_name: p.item for p in event.prompts}
            changed = prompts != offer.prompts
            offer.prompts = prompts
            if changed and server.visible:
                self.prompts_version += 1

    def _offer_changed(self, server_id: str) -> None:
        """A server's resources and prompts appeared or vanished with its status."""
        offer = self._offers.get(server_id)
        if offer is None:
            return
        if offer.resources or offer.templates:
            self.resources_version += 1
        if offer.prompts:
            self.prompts_version += 1

    def _set_tools(self, server_id: str, listed: dict[str, CatalogTool]) -> None:
        """Replace a server's tool list (and the by-name index)."""
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
        self._count_held(server_id)

    def _count_held(self, server_id: str) -> None:
        held = sum(1 for tool in self._tools.get(server_id, {}).values() if tool.hold is not None)
        if held:
            self._held[server_id] = held
        else:
            self._held.pop(server_id, None)

    # -- for views ---------------------------------------------------------------------------------

    def _servers_sorted(self) -> list[CatalogServer]:
        return sorted(self._servers.values(), key=lambda s: (s.name, s.namespace))

    def _id_named(self, namespace: str, name: str) -> str | None:
        return self._ids_by_name.get((namespace, name))

    def _holders(self, original_name: str) -> list[str]:
        return list(self._servers_by_tool.get(original_name, ()))

    def _held_counts(self) -> dict[str, int]:
        return self._held


def _shown(tools: dict[str, CatalogTool]) -> dict[str, CatalogTool]:
    """The tools clients see: every tool that is not held back."""
    return {name: tool for name, tool in tools.items() if tool.hold is None}


@dataclass(frozen=True)
class CatalogView:
    """The catalog as one caller sees it: one namespace, or every namespace (``namespace`` None)."""

    catalog: Catalog
    namespace: str | None

    def _in(self, server: CatalogServer | None) -> CatalogServer | None:
        if server is None or (self.namespace is not None and server.namespace != self.namespace):
            return None
        return server

    # -- RouteSource -----------------------------------------------------------------------------

    def server(self, server_id: str) -> CatalogServer | None:
        """A server by id, if the caller can see it."""
        return self._in(self.catalog.server(server_id))

    def servers_named(self, name: str) -> Sequence[CatalogServer]:
        """Servers registered under ``name`` that the caller can see."""
        if self.namespace is not None:
            server_id = self.catalog._id_named(self.namespace, name)
            found = self.catalog.server(server_id) if server_id else None
            return [found] if found is not None else []
        return [s for s in self.catalog._servers_sorted() if s.name == name]

    def server_named(self, name: str) -> CatalogServer | None:
        """The one server of that name the caller can see (None when none, or several for the owner)."""
        found = self.servers_named(name)
        return found[0] if len(found) == 1 else None

    def has_tool(self, server_id: str, original_name: str) -> bool:
        """True when the server's last tool list has ``original_name`` (held or not)."""
        return self.server(server_id) is not None and self.catalog.tool(server_id, original_name) is not None

    def servers_with_tool(self, original_name: str) -> Sequence[CatalogServer]:
        """Every server the caller can see whose tool list has ``original_name``."""
        return [s for i in self.catalog._holders(original_name) if (s := self.server(i)) is not None]

    def hold_of(self, server_id: str, original_name: str) -> Hold | None:
        """Why the tool is held back, or None."""
        tool = self.catalog.tool(server_id, original_name)
        return tool.hold if tool is not None else None

    @property
    def narrowed(self) -> bool:
        """True when the view shows only some tools of its servers (an endpoint's bundle)."""
        return False

    def allows_tool(self, server_id: str, original_name: str) -> bool:
        """True when the caller may see the tool at all (an endpoint's view narrows this)."""
        return self.server(server_id) is not None

    def renames(self) -> dict[tuple[str, str], ToolOverride]:
        """Tools shown under another name or description (only an endpoint's view has any)."""
        return {}

    def held_count(self) -> int:
        """How many tools of the caller's servers are held back (search asks for that many more)."""
        return sum(n for server_id, n in self.catalog._held_counts().items() if self.server(server_id) is not None)

    # -- the front door's reads ------------------------------------------------------------------

    def servers(self) -> list[CatalogServer]:
        """Every server the caller can see, by name."""
        return [s for s in self.catalog._servers_sorted() if self._in(s) is not None]

    def tools_of(self, server_id: str, *, include_held: bool = False) -> list[CatalogTool]:
        """The tools clients may see of a server (not held back, unless asked), by name."""
        if self.server(server_id) is None:
            return []
        return [t for t in self.catalog.tools_of(server_id) if include_held or t.hold is None]

    def visible_offers(self) -> list[tuple[CatalogServer, ServerOffer]]:
        """The offer of every CONNECTED or DEGRADED server the caller can see, by server name."""
        return [(s, self.catalog.offer(s.id)) for s in self.servers() if s.visible]

    def server_for_uri(self, uri: str) -> CatalogServer | None:
        """The visible server that serves a resource URI (the README's collision rule)."""
        name = serving_server(uri, ((s.name, o) for s, o in self.visible_offers()))
        return self.server_named(name) if name is not None else None

    def server_for_template(self, template: str) -> CatalogServer | None:
        """The visible server listing a resource template (first by name)."""
        name = template_owner(template, ((s.name, o) for s, o in self.visible_offers()))
        return self.server_named(name) if name is not None else None

    def servers_with_prompt(self, original_name: str) -> list[CatalogServer]:
        """Every visible server listing a prompt by that name."""
        return [s for s, o in self.visible_offers() if original_name in o.prompts]

    def visible(self, *, include_held: bool = False) -> list[tuple[CatalogServer, CatalogTool]]:
        """Every tool clients may call: of CONNECTED or DEGRADED servers, not held back (unless asked)."""
        return [(s, t) for s in self.servers() if s.visible for t in self.tools_of(s.id, include_held=include_held)]
