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
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from livemcpbench import DATA  # noqa: E402

from tests.retrieval.catalog import classify_index, load_index, read_jsonl, servers_of  # noqa: E402
from tests.retrieval.scoring import means, per_task  # noqa: E402
from toolmesh.contracts.search import SearchRequest  # noqa: E402
from toolmesh.embed.lane import EmbeddingLanes  # noqa: E402
from toolmesh.embed.model import DIMENSIONS, load_embedder  # noqa: E402
from toolmesh.search.ranking import BM25_ONLY, DENSE_ONLY, Weights  # noqa: E402
from toolmesh.search.service import SearchService  # noqa: E402
from toolmesh_projector.vector_index.edge import EdgeIndex  # noqa: E402

VARIANTS: dict[str, tuple[Weights, Literal["hierarchical", "flat"]]] = {
    "bm25": (BM25_ONLY, "flat"),
    "dense": (DENSE_ONLY, "flat"),
    "flat": (Weights(), "flat"),
    "hierarchical": (Weights(), "hierarchical"),
}


async def evaluate(
    service: SearchService, strategy: Literal["hierarchical", "flat"], queries: list[dict[str, Any]]
) -> dict[str, Any]:
    """Metrics on the tuning half, the held-out half and all tasks."""
    rows = await per_task(service, strategy, queries)
    return {"tune": means(rows[0::2]), "held_out": means(rows[1::2]), "all": means(rows)}


async def main() -> None:
    embedder = load_embedder()
    if embedder is None:
        raise SystemExit("the embedding model did not load")
    queries = read_jsonl(DATA / "queries.jsonl")
    servers = servers_of(DATA / "tools.jsonl")
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
