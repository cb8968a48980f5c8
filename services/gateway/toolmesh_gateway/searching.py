"""Search as one caller sees it: its namespace only (an endpoint's: its bundle only), and never a tool
held back by pinning."""

from __future__ import annotations

from toolmesh.contracts.search import SearchRequest, SearchResponse
from toolmesh.search.service import SearchService
from toolmesh_gateway.catalog_view import CatalogView

MAX_LIMIT = 100
"""The search API's largest page."""


async def search_visible(service: SearchService, request: SearchRequest, view: CatalogView) -> SearchResponse:
    """Run ``request`` in the view's namespace and drop held tools and tools the view does not show
    (asking for as many more as are held, or for a full page when the view is an endpoint's)."""
    held = view.held_count()
    wanted = MAX_LIMIT if view.narrowed else min(request.limit + held, MAX_LIMIT)
    widened = request.model_copy(update={"limit": wanted}) if wanted != request.limit else request
    found = await service.search(widened, namespace=view.namespace)
    if held or view.narrowed:
        found.tools = [
            t
            for t in found.tools
            if view.allows_tool(t.source_server.id, t.original_name)
            and view.hold_of(t.source_server.id, t.original_name) is None
        ][: request.limit]
    return found
