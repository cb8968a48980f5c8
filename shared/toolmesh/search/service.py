"""Tool search over the current catalog: dense and BM25F signals mixed, skills as a soft bonus.

``SearchService.search`` is the one entry point: the REST route, the CLI (through the route), the
gateway's MCP meta-tool and the NATS search request all call it. A process that holds no catalog
(its index lives in another process) forwards the request to one that does (``search.remote``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import numpy as np

from toolmesh.contracts.search import (
    MatchedSkill,
    SearchMetadata,
    SearchRequest,
    SearchResponse,
    SourceServer,
    ToolHit,
)
from toolmesh.embed.model import Embedder
from toolmesh.errors import BackendUnavailable, ToolmeshError
from toolmesh.index.base import Where
from toolmesh.lifecycle import SERVING
from toolmesh.search.catalog import Catalog
from toolmesh.search.query import clauses, searchable
from toolmesh.search.ranking import Vectors, Weights, score, top

log = logging.getLogger("toolmesh.search")
MAX_SKILLS = 5
QUERY_CACHE_SIZE = 512  # query vectors kept: agents repeat their searches
CatalogSource = Callable[[], Awaitable[Catalog | None]]
DbIds = Callable[[list[tuple[str, str]]], Awaitable[dict[tuple[str, str], int]]]
"""The database ids of tools, by (server id, original name)."""


class Forwarder(Protocol):
    """Answers a search in another process (the one holding the catalog)."""

    async def search(self, request: SearchRequest, namespace: str | None) -> SearchResponse: ...

    async def health(self, namespace: str | None) -> dict[str, Any]: ...


class SearchService:
    """Answers searches against the catalog ``catalogs`` gives (None: not held here, forward or fail)."""

    def __init__(
        self,
        catalogs: CatalogSource,
        embedder: Embedder | None,
        db_ids: DbIds | None = None,
        *,
        query_cache_size: int = QUERY_CACHE_SIZE,
        weights: Weights | None = None,
        forwarder: Forwarder | None = None,
        lag: Callable[[Catalog], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self._catalogs = catalogs
        self.embedder = embedder
        self._db_ids = db_ids
        self._query_cache_size = query_cache_size
        self.weights = weights or Weights()
        self._forwarder = forwarder
        self._lag = lag
        self._query_vectors: OrderedDict[str, Vectors] = OrderedDict()

    async def health(self, namespace: str | None = None) -> dict[str, Any]:
        """Catalog, model and index lag, for the health endpoint. For one ``namespace`` (a caller who is
        not the owner): its tools only, and no stream positions (they count every namespace's events)."""
        catalog = await self._catalogs()
        if catalog is None:
            if self._forwarder is None:
                return {"index": "error: the search index is not available in this process", "embedder": self._model()}
            try:
                return await self._forwarder.health(namespace)
            except ToolmeshError as exc:
                return {"index": f"error: {exc.detail}", "embedder": self._model()}
        alive = catalog.mask(Where(namespace=namespace))
        result: dict[str, Any] = {"index": "ok", "embedder": self._model(), "tools": int(np.count_nonzero(alive))}
        if self.embedder is not None:
            result["tools_without_vector"] = int(np.count_nonzero(alive & ~catalog.flags["embedded"]))
        if namespace is None:
            result["last_applied_seq"] = catalog.seq
            if self._lag is not None:
                result.update(await self._lag(catalog))
        return result

    def _model(self) -> str:
        return f"ok ({self.embedder.model_id})" if self.embedder is not None else "unavailable: BM25 only"

    async def search(self, request: SearchRequest, *, namespace: str | None = None) -> SearchResponse:
        """Run one search; ``namespace`` is the caller's (a request for another namespace finds nothing)."""
        started = time.perf_counter()
        catalog = await self._catalogs()
        if catalog is None:
            if self._forwarder is None:
                raise BackendUnavailable("The search index is not available in this process")
            response = await self._forwarder.search(request, namespace)
        else:
            response = await self._search(catalog, request, namespace, started)
        if self._db_ids is not None and response.tools:
            known = await self._db_ids([(t.source_server.id, t.original_name) for t in response.tools])
            for tool in response.tools:
                tool.db_id = known.get((tool.source_server.id, tool.original_name))
                tool.id = str(tool.db_id) if tool.db_id is not None else tool.id
        response.metadata.total_time_ms = round((time.perf_counter() - started) * 1000, 3)
        return response

    async def _search(
        self, catalog: Catalog, request: SearchRequest, namespace: str | None, started: float
    ) -> SearchResponse:
        where = Where(
            kind="tool",
            statuses=[str(s) for s in SERVING],
            server_names=request.server_filter or None,
            external_only_false=not request.include_external,
            namespace=request.namespace or namespace,
            categories=request.categories or None,
        )
        if namespace and request.namespace and request.namespace != namespace:
            where = Where(kind="tool", server_names=[])  # another tenant's tools are invisible
        text = searchable(request.query)
        vectors = await self._embed_query(text)
        allowed = catalog.mask(where)
        lexical = catalog.lexical.scores(text)
        matched: list[MatchedSkill] = []
        if request.strategy == "hierarchical" and vectors is not None:
            matched = self._match_skills(catalog, vectors[0], request.skill_threshold)
        positions, scores = score(catalog, allowed, lexical, vectors, self.weights, {s.id: s.score for s in matched})
        tools = [
            _tool_hit(str(catalog.ids[i]), catalog.payloads[i] or {}, value, request.include_schemas)
            for i, value in top(positions, scores, request.limit)
            if value > 0 and value >= request.tool_threshold
        ]
        return SearchResponse(
            query=request.query,
            tools=tools,
            matched_skills=matched,
            metadata=SearchMetadata(
                strategy_used="hierarchical" if matched else "flat",
                retrieval="hybrid" if vectors is not None else "bm25",
                servers_searched=catalog.count_servers(allowed),
                external_tools_count=int(np.count_nonzero(allowed)),
                total_time_ms=round((time.perf_counter() - started) * 1000, 3),
            ),
        )

    async def _embed_query(self, query: str) -> Vectors | None:
        """The query's vector, then one per clause (cached by query text)."""
        if self.embedder is None:
            return None
        cache = self._query_vectors
        vectors = cache.get(query)
        if vectors is None:
            vectors = await asyncio.to_thread(self.embedder.embed, [query, *clauses(query)])
            if self._query_cache_size > 0:
                cache[query] = vectors
                if len(cache) > self._query_cache_size:
                    cache.popitem(last=False)
        else:
            cache.move_to_end(query)
        return vectors

    def _match_skills(self, catalog: Catalog, vector: Vectors, threshold: float) -> list[MatchedSkill]:
        skills = catalog.skills
        if not skills.ids:
            return []
        similarities = skills.vectors @ vector
        order = np.argsort(-similarities, kind="stable")[:MAX_SKILLS]
        return [
            MatchedSkill(
                id=skills.ids[i],
                name=str(skills.payloads[i].get("name", "")),
                description=str(skills.payloads[i].get("description", "")),
                score=round(float(similarities[i]), 4),
                tool_count=int(skills.payloads[i].get("tool_count", 0)),
            )
            for i in order
            if similarities[i] >= threshold
        ]


def _tool_hit(point_id: str, p: dict[str, Any], value: float, include_schema: bool) -> ToolHit:
    return ToolHit(
        id=point_id,
        name=str(p["name"]),
        original_name=str(p["original_name"]),
        description=p.get("description"),
        score=round(value, 4),
        skill_ids=list(p.get("skill_ids") or []),
        primary_skill_id=p.get("primary_skill_id"),
        is_classified=bool(p.get("is_classified")),
        category=p.get("category"),
        source_server=SourceServer(
            id=str(p["source_server_id"]), name=str(p["source_server_name"]), status=str(p.get("server_status"))
        ),
        input_schema=p.get("input_schema") if include_schema else None,
    )
