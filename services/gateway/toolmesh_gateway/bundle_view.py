"""The catalog as one endpoint (bundle) shows it: a ``CatalogView`` limited to what the bundle
selects, so routing, listings, prompts, resources, search and code mode see exactly the bundle: a
server it selects nothing of is not there, nor is an item it does not select. No I/O here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolmesh.contracts.endpoints import ToolOverride
from toolmesh_gateway.bundles import Bundle
from toolmesh_gateway.catalog import CatalogServer, CatalogTool
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.offers import ServerOffer


@dataclass(frozen=True)
class BundleView(CatalogView):
    """The catalog as a bundle shows it (inside its namespace)."""

    bundle: Bundle | None = None

    def _shows(self, server: CatalogServer, tool: str) -> bool:
        return self.bundle is None or self.bundle.shows_tool(server.name, tool)

    def _in(self, server: CatalogServer | None) -> CatalogServer | None:
        """A server of the namespace that the bundle selects a tool, prompt or resource of."""
        found = super()._in(server)
        if found is None or self.bundle is None:
            return found
        offer = self.catalog.offer(found.id)
        items = (*offer.prompts, *offer.resources, *offer.templates)
        if any(self.bundle.selects(found.name, item) for item in items):
            return found
        return found if any(self._shows(found, t.name) for t in self.catalog.tools_of(found.id)) else None

    def tools_of(self, server_id: str, *, include_held: bool = False) -> list[CatalogTool]:
        """The bundle's tools of a server."""
        server = self.server(server_id)
        if server is None:
            return []
        return [t for t in super().tools_of(server_id, include_held=include_held) if self._shows(server, t.name)]

    def has_tool(self, server_id: str, original_name: str) -> bool:
        """True only for tools the bundle shows."""
        server = self.server(server_id)
        return server is not None and super().has_tool(server_id, original_name) and self._shows(server, original_name)

    def servers_with_tool(self, original_name: str) -> Sequence[CatalogServer]:
        """Servers whose tool of that name the bundle shows."""
        return [s for s in super().servers_with_tool(original_name) if self._shows(s, original_name)]

    def offer(self, server: CatalogServer) -> ServerOffer:
        """The server's prompts, resources and templates that the bundle selects."""
        offer = super().offer(server)
        if self.bundle is None:
            return offer
        selects = self.bundle.selects
        return ServerOffer(
            description=offer.description,
            resources={k: v for k, v in offer.resources.items() if selects(server.name, k)},
            templates={k: v for k, v in offer.templates.items() if selects(server.name, k)},
            prompts={k: v for k, v in offer.prompts.items() if selects(server.name, k)},
            prompt_pins={k: v for k, v in (offer.prompt_pins or {}).items() if selects(server.name, k)},
        )

    @property
    def narrowed(self) -> bool:
        """True: a bundle shows only what it selects."""
        return self.bundle is not None

    def renames(self) -> dict[tuple[str, str], ToolOverride]:
        """Tools shown under another name or description."""
        return self.bundle.renames() if self.bundle is not None else {}

    def allows_tool(self, server_id: str, original_name: str) -> bool:
        """True when the bundle shows the tool (search filters its hits with this)."""
        server = self.server(server_id)
        return server is not None and self._shows(server, original_name)
