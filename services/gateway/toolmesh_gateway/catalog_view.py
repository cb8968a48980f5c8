"""What one caller sees of the gateway's ``Catalog``: one namespace, or every namespace (the owner).

A ``CatalogView`` is the ``RouteSource`` of routing and what the front door lists; an endpoint's
``BundleView`` narrows it further.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolmesh.contracts.endpoints import ToolOverride
from toolmesh.pinning import Hold
from toolmesh_gateway.offers import ServerOffer, serving_server, template_owner

if TYPE_CHECKING:
    from toolmesh_gateway.catalog import Catalog, CatalogServer, CatalogTool


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
            server_id = self.catalog.id_named(self.namespace, name)
            found = self._in(self.catalog.server(server_id)) if server_id else None
            return [found] if found is not None else []
        return [s for s in self.catalog.servers_sorted() if s.name == name and self._in(s) is not None]

    def server_named(self, name: str) -> CatalogServer | None:
        """The one server of that name the caller can see (None when none, or several for the owner)."""
        found = self.servers_named(name)
        return found[0] if len(found) == 1 else None

    def has_tool(self, server_id: str, original_name: str) -> bool:
        """True when the server's last tool list has ``original_name`` (held or not)."""
        return self.server(server_id) is not None and self.catalog.tool(server_id, original_name) is not None

    def servers_with_tool(self, original_name: str) -> Sequence[CatalogServer]:
        """Every server the caller can see whose tool list has ``original_name``."""
        return [s for i in self.catalog.holders(original_name) if (s := self.server(i)) is not None]

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
        return sum(n for server_id, n in self.catalog.held_counts().items() if self.server(server_id) is not None)

    # -- the front door's reads ------------------------------------------------------------------

    def servers(self) -> list[CatalogServer]:
        """Every server the caller can see, by name."""
        return [s for s in self.catalog.servers_sorted() if self._in(s) is not None]

    def tools_of(self, server_id: str, *, include_held: bool = False) -> list[CatalogTool]:
        """The tools clients may see of a server (not held back, unless asked), by name."""
        if self.server(server_id) is None:
            return []
        return [t for t in self.catalog.tools_of(server_id) if include_held or t.hold is None]

    def offer(self, server: CatalogServer) -> ServerOffer:
        """The prompts, resources and templates of a server the caller can see, as the caller sees them."""
        return self.catalog.offer(server.id)

    def visible_offers(self) -> list[tuple[CatalogServer, ServerOffer]]:
        """The offer of every CONNECTED or DEGRADED server the caller can see, by server name."""
        return [(s, self.offer(s)) for s in self.servers() if s.visible]

    def offers_by_arrival(self) -> list[tuple[CatalogServer, ServerOffer]]:
        """``visible_offers`` with the server registered first first: the order the collision rule uses."""
        return sorted(self.visible_offers(), key=lambda pair: (pair[0].registered_seq, pair[0].name, pair[0].namespace))

    def server_for_uri(self, uri: str) -> CatalogServer | None:
        """The visible server that serves a resource URI (the collision rule of docs/usage.md: first come)."""
        return serving_server(uri, self.offers_by_arrival())

    def server_for_template(self, template: str) -> CatalogServer | None:
        """The visible server registered first of those listing a resource template."""
        return template_owner(template, self.offers_by_arrival())

    def servers_with_prompt(self, original_name: str) -> list[CatalogServer]:
        """Every visible server listing a prompt by that name."""
        return [s for s, o in self.visible_offers() if original_name in o.prompts]

    def visible(self, *, include_held: bool = False) -> list[tuple[CatalogServer, CatalogTool]]:
        """Every tool clients may call: of CONNECTED or DEGRADED servers, not held back (unless asked)."""
        return [(s, t) for s in self.servers() if s.visible for t in self.tools_of(s.id, include_held=include_held)]
