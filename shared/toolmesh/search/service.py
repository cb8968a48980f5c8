"""Hybrid tool search: dense (index) and BM25 (catalog) rankings fused by RRF, flat or skills-first.

``SearchService.search`` is the one entry point: the REST route, the CLI (through the route) and
the gateway's MCP meta-tool all call it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

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
from toolmesh.errors import BackendUnavailable
from toolmesh.index.base import Hit, ToolIndex, Where
from toolmesh.lifecycle import SERVING
from toolmesh.search.catalog import Catalog, Mask
from toolmesh.search.fusion import normalised, reciprocal_rank_fusion
from toolmesh.search.lexical import Scores, best

log = logging.getLogger("toolmesh.search")
CANDIDATES = 50  # per ranking, before fusion
MAX_SKILLS = 5
QUERY_CACHE_SIZE = 512  # query vectors kept: agents repeat their searches
IndexSource = Callable[[], Awaitable[ToolIndex | None]]
DbIds = Callable[[list[str]], Awaitable[dict[str, int]]]


class SearchService:
    """Answers searches against whatever index ``index_source`` gives (None: not available here)."""

    def __init__(
        self,
        index_source: IndexSource,
        embedder: Embedder | None,
        db_ids: DbIds | None = None,
        *,
        query_cache_size: int = QUERY_CACHE_SIZE,
    ) -> None:
        self._index_source = index_source
        self.embedder = embedder
        self._db_ids = db_ids
        self._query_cache_size = query_cache_size
        self._catalog: Catalog | None = None
        self._catalog_lock = asyncio.Lock()
        self._query_vectors: OrderedDict[str, list[float]] = OrderedDict()

    async def _index(self) -> ToolIndex:
        index = await self._index_source()
        if index is None:
            raise BackendUnavailable("The search index is not available in this process")
        return index

    async def health(self) -> dict[str, Any]:
        """Backend, model and catalog state, for the health endpoint."""
        try:
            index = await self._index()
            state = await index.load_state()
        except BackendUnavailable as exc:
            return {"index": f"error: {exc.detail}", "embedder": self._embedder_status()}
        return {
            "index": "ok",
            "backend": index.backend,
            "embedder": self._embedder_status(),
            "last_applied_seq": state.last_seq,
        }

    def _embedder_status(self) -> str:
        return f"ok ({self.embedder.model_id})" if self.embedder is not None else "unavailable: BM25 only"

    async def catalog(self, index: ToolIndex) -> Catalog:
        """The catalog for the index's current revision (rebuilt at most once at a time)."""
        revision = (await index.load_state()).revision
        current = self._catalog
        if current is not None and current.revision == revision:
            return current
        async with self._catalog_lock:
            current = self._catalog
            if current is None or current.revision != revision:
                hits = await index.scroll(Where(kind="tool"))
                current = await asyncio.to_thread(Catalog.build, revision, hits, current)
                self._catalog = current
        return current

    async def _prepare(self, where: Where, query: str) -> tuple[ToolIndex, Catalog, Mask, Scores | None]:
        """The index, its catalog, the tools ``where`` allows and the BM25 scores of ``query``."""
        index = await self._index()
        catalog = await self.catalog(index)
        return index, catalog, catalog.mask(where), catalog.lexical.scores(query)

    async def search(self, request: SearchRequest, *, namespace: str | None = None) -> SearchResponse:
        """Run one search; ``namespace`` is the caller's (a request for another namespace finds nothing)."""
        started = time.perf_counter()
        where = Where(
            kind="tool",
            statuses=[str(s) for s in SERVING],
            server_names=request.server_filter or None,
            external_only_false=not request.include_external,
            namespace=request.namespace or namespace,
        )
        if namespace and request.namespace and request.namespace != namespace:
            where = replace(where, server_names=[])  # another tenant's tools are invisible
        # The query embeds in a worker thread while this thread does the in-memory work (gather,
        # not a TaskGroup: errors keep their own type for the error table).
        query_vector, (index, catalog, base, lexical) = await asyncio.gather(
            self._embed_query(request.query), self._prepare(where, request.query)
        )
        matched: list[MatchedSkill] = []
        strategy = "flat"
        tools: list[ToolHit] = []
        if request.strategy == "hierarchical" and query_vector is not None:
            matched = await self._match_skills(index, query_vector, request.skill_threshold)
            if matched:
                narrowed = replace(where, skill_ids=[s.id for s in matched], or_unclassified=True)
                tools = await self._tools(
                    index, catalog, narrowed, catalog.mask(narrowed), lexical, request, query_vector
                )
                strategy = "hierarchical" if tools else "flat"
        if strategy == "flat":
            tools = await self._tools(index, catalog, where, base, lexical, request, query_vector)
        if self._db_ids is not None and tools:
            known = await self._db_ids([t.name for t in tools])
            for tool in tools:
                tool.db_id = known.get(tool.name)
                tool.id = str(tool.db_id) if tool.db_id is not None else tool.id
        return SearchResponse(
            query=request.query,
            tools=tools,
            matched_skills=matched,
            metadata=SearchMetadata(
                strategy_used=strategy,  # type: ignore[arg-type]
                retrieval="hybrid" if query_vector is not None else "bm25",
                servers_searched=catalog.count_servers(base),
                external_tools_count=int(np.count_nonzero(base)),
                total_time_ms=round((time.perf_counter() - started) * 1000, 3),
            ),
        )

    async def _embed_query(self, query: str) -> list[float] | None:
        if self.embedder is None:
            return None
        cache = self._query_vectors
        vector = cache.get(query)
        if vector is None:
            vectors = await asyncio.to_thread(self.embedder.embed, [query])
            vector = vectors[0].tolist()
            if self._query_cache_size > 0:
                cache[query] = vector
                if len(cache) > self._query_cache_size:
                    cache.popitem(last=False)
        else:
            cache.move_to_end(query)
        return vector

    async def _match_skills(self, index: ToolIndex, vector: list[float], threshold: float) -> list[MatchedSkill]:
        hits = await index.query(vector, Where(kind="skill"), MAX_SKILLS)
        return [
            MatchedSkill(
                id=str(h.payload["skill_id"]),
                name=str(h.payload.get("name", "")),
                description=str(h.payload.get("description", "")),
                score=round(h.score, 4),
                tool_count=int(h.payload.get("tool_count", 0)),
            )
            for h in hits
            if h.score >= threshold
        ]

    async def _tools(
        self,
        index: ToolIndex,
        catalog: Catalog,
        where: Where,
        allowed: Mask,
        lexical: Scores | None,
        request: SearchRequest,
        vector: list[float] | None,
    ) -> list[ToolHit]:
        """Fused dense and BM25 ranking; ``allowed`` is ``catalog.mask(where)``, ``lexical`` the BM25 scores."""
        # Payloads come from the catalog, so the index returns ids and scores only. A point newer
        # than the catalog (the index moved during this search) waits for the next search.
        rankings: list[list[int]] = []
        if vector is not None:
            dense = await index.query(vector, replace(where, embedded_only=True), CANDIDATES, with_payload=False)
            # Equal scores (the same tool on two servers embeds the same) in catalog order, not in
            # whatever order the index's segments hold them: a rebuilt index must answer the same.
            scored = [(-h.score, i) for h in dense if (i := catalog.position.get(h.id)) is not None]
            rankings.append([i for _, i in sorted(scored)])
        rankings.append([i for i, _ in best(lexical, CANDIDATES, allowed)])
        found: list[ToolHit] = []
        for i, fused in reciprocal_rank_fusion(rankings):
            score = normalised(fused, len(rankings))
            if score < request.tool_threshold:
                continue
            hit = Hit(catalog.ids[i], catalog.payloads[i], score)
            found.append(_tool_hit(hit, request.include_schemas))
            if len(found) == request.limit:
                break
        return found


def _tool_hit(hit: Hit, include_schema: bool) -> ToolHit:
    p = hit.payload
    return ToolHit(
        id=hit.id,
        name=str(p["name"]),
        original_name=str(p["original_name"]),
        description=p.get("description"),
        score=round(hit.score, 4),
        skill_ids=list(p.get("skill_ids") or []),
        primary_skill_id=p.get("primary_skill_id"),
        is_classified=bool(p.get("is_classified")),
        source_server=SourceServer(
            id=str(p["source_server_id"]), name=str(p["source_server_name"]), status=str(p.get("server_status"))
        ),
        input_schema=p.get("input_schema") if include_schema else None,
    )
