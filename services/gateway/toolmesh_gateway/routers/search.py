"""``POST /api/v1/search``: hybrid tool search over CONNECTED and DEGRADED servers."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from toolmesh.contracts.search import SearchRequest, SearchResponse
from toolmesh.search.service import SearchService
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.searching import search_visible

router = APIRouter(prefix="/api/v1", tags=["search"])
Auth = Annotated[Principal, Depends(require_principal)]


def search_service(request: Request) -> SearchService:
    """The process's search service (also what the MCP front door's search meta-tool calls)."""
    result: SearchService = request.app.state.search
    return result


Search = Annotated[SearchService, Depends(search_service)]


@router.post("/search")
async def search(body: SearchRequest, request: Request, principal: Auth, service: Search) -> SearchResponse:
    """The caller's tools matching the query, skills first (``hierarchical``) or directly (``flat``)."""
    feed: CatalogFeed = request.app.state.catalog_feed
    # The owner may look into one namespace; anyone else asking for another one finds nothing.
    namespace = principal.scope if principal.scope is not None else body.namespace
    return await search_visible(service, body, feed.catalog.view(namespace))


@router.get("/search/health")
async def search_health(principal: Auth, service: Search) -> dict[str, Any]:
    """Index backend and embedding model state (BM25-only when the model could not load); the counts
    are of the caller's namespace (the owner's: of every namespace, with the index's stream position)."""
    return await service.health(principal.scope)
