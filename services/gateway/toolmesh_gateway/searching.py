"""Search as one caller sees it: its namespace only, and never a tool held back by pinning."""

from __future__ import annotations

from toolmesh.contracts.search import SearchRequest, SearchResponse
from toolmesh.search.service import SearchService
from toolmesh_gateway.catalog_view import CatalogView

MAX_LIMIT = 100
"""The search API's largest page."""


async def search_visible(service: SearchService, request: SearchRequest, view: CatalogView) -> SearchResponse:
    """Run ``request`` in the view's namespace and drop held tools (asking for as many more as are held)."""
    held = view.held_count()
    widened = request.model_copy(update={"limit": min(request.limit + held, 100)}) if held else request
    found = await service.search(widened, namespace=view.namespace)
    if held:
        found.tools = [t for t in found.tools if view.hold_of(t.source_server.id, t.original_name) is None][
            : request.limit
        ]
    return found
