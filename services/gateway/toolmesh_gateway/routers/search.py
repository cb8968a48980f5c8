"""``POST /api/v1/search``: hybrid tool search over CONNECTED and DEGRADED servers."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from toolmesh.contracts.search import SearchRequest, SearchResponse
from toolmesh.search.service import SearchService
from toolmesh_gateway.auth import Principal, require_principal

router = APIRouter(prefix="/api/v1", tags=["search"])
Auth = Annotated[Principal, Depends(require_principal)]


def search_service(request: Request) -> SearchService:
    """The process's search service (also what the MCP front door's search meta-tool calls)."""
    result: SearchService = request.app.state.search
    return result


Search = Annotated[SearchService, Depends(search_service)]


@router.post("/search")
async def search(body: SearchRequest, principal: Auth, service: Search) -> SearchResponse:
    """Tools matching the query, skills first (``hierarchical``) or directly (``flat``)."""
    return await service.search(body, namespace=principal.namespace)


@router.get("/search/health")
async def search_health(_: Auth, service: Search) -> dict[str, Any]:
    """Index backend and embedding model state (BM25-only when the model could not load)."""
    return await service.health()
