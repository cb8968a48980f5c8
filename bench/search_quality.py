"""Retrieval quality on LiveMCPBench (527 tools, 94 tasks) through the product's ``SearchService``.

Every variant runs the code path of ``POST /api/v1/search``: tools fed to the index projection as
events, classified by the product's classifier, searched by ``SearchService``. Variants: ``bm25``
(BM25F alone), ``dense`` (the model alone), ``flat`` (the default mix), ``hierarchical`` (the
default strategy: the mix plus skills as a bonus), and ``hierarchical_unclassified`` (the default
strategy before the classifier ran). Each is reported on the tuning half (even task numbers), the
held-out half (odd) and all tasks.

recall@k = share of a task's gold slots with a candidate in the top k, averaged over tasks;
MRR@10 = 1 / rank of the first result that fills any slot (0 beyond 10). Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import DATA, classify_index, livemcp_servers, load_index, read_jsonl

from toolmesh.contracts.search import SearchRequest
from toolmesh.embed.lane import EmbeddingLanes
from toolmesh.embed.model import DIMENSIONS, load_embedder
from toolmesh.search.ranking import BM25_ONLY, DENSE_ONLY, Weights
from toolmesh.search.service import SearchService
from toolmesh_projector.vector_index.edge import EdgeIndex

VARIANTS: dict[str, tuple[Weights, str]] = {
    "bm25": (BM25_ONLY, "flat"),
    "dense": (DENSE_ONLY, "flat"),
    "flat": (Weights(), "flat"),
    "hierarchical": (Weights(), "hierarchical"),
}


def scores(ranked: list[str], slots: list[list[str]]) -> tuple[float, float, float]:
    def recall(k: int) -> float:
        top = set(ranked[:k])
        return sum(1 for slot in slots if top & set(slot)) / len(slots)

    gold = {name for slot in slots for name in slot}
    rr = next((1.0 / rank for rank, name in enumerate(ranked[:10], start=1) if name in gold), 0.0)
    return recall(1), recall(5), rr


async def evaluate(service: SearchService, strategy: str, queries: list[dict[str, Any]]) -> dict[str, Any]:
    """Metrics on the tuning half, the held-out half and all tasks."""
    per_query = []
    for q in queries:
        request = SearchRequest(query=str(q["query"]), limit=10, strategy=strategy)  # type: ignore[arg-type]
        response = await service.search(request)
        ranked = [f"{t.source_server.name}.{t.original_name}" for t in response.tools]
        per_query.append(scores(ranked, q["gold_slots"]))
    result: dict[str, Any] = {}
    for part, rows in (("tune", per_query[0::2]), ("held_out", per_query[1::2]), ("all", per_query)):
        n = len(rows)
        result[part] = {
            "recall@1": round(sum(r[0] for r in rows) / n, 3),
            "recall@5": round(sum(r[1] for r in rows) / n, 3),
            "mrr@10": round(sum(r[2] for r in rows) / n, 3),
        }
    return result


async def main() -> None:
    embedder = load_embedder()
    if embedder is None:
        raise SystemExit("the embedding model did not load")
    queries = read_jsonl(DATA / "queries.jsonl")
    servers = livemcp_servers()
    lanes = EmbeddingLanes()  # one lane for the indexer and the classifier, as in one process
    result: dict[str, Any] = {"benchmark": "search_quality", "tools": 527, "queries": len(queries)}
    with tempfile.TemporaryDirectory() as tmp:
        index = EdgeIndex(Path(tmp), DIMENSIONS)
        started = time.perf_counter()
        projection = await load_index(index, embedder, servers, lanes)
        result["indexing_seconds"] = round(time.perf_counter() - started, 2)
        catalogs = projection.table.catalog
        default = SearchService(catalogs, embedder)
        result["hierarchical_unclassified"] = await evaluate(default, "hierarchical", queries)
        started = time.perf_counter()
        await classify_index(projection, embedder, servers, lanes)
        result["classifying_seconds"] = round(time.perf_counter() - started, 2)
        for name, (weights, strategy) in VARIANTS.items():
            result[name] = await evaluate(SearchService(catalogs, embedder, weights=weights), strategy, queries)
        result["default_strategy"] = SearchRequest(query="x").strategy
        await index.close()
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
