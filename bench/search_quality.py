"""Retrieval quality on LiveMCPBench (527 tools, 94 tasks): recall@1, recall@5, MRR@10 for bm25, dense, hybrid.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import DATA, livemcp_servers, load_index, read_jsonl

from toolmesh.contracts.search import SearchRequest
from toolmesh.embed.model import load_embedder
from toolmesh.index.edge import EdgeIndex
from toolmesh.search.service import SearchService


def scores(ranked: list[str], slots: list[list[str]]) -> tuple[float, float, float]:
    def recall(k: int) -> float:
        top = set(ranked[:k])
        return sum(1 for slot in slots if top & set(slot)) / len(slots)

    gold = {name for slot in slots for name in slot}
    rr = next((1.0 / rank for rank, name in enumerate(ranked[:10], start=1) if name in gold), 0.0)
    return recall(1), recall(5), rr


async def main() -> None:
    embedder = load_embedder()
    queries = read_jsonl(DATA / "queries.jsonl")
    with tempfile.TemporaryDirectory() as tmp:
        index = EdgeIndex(Path(tmp), 384)
        started = time.perf_counter()
        await load_index(index, embedder, livemcp_servers())
        indexing_s = time.perf_counter() - started
        variants = {
            "bm25": SearchService(_source(index), None),
            "hybrid": SearchService(_source(index), embedder),
        }
        result: dict[str, object] = {"benchmark": "search_quality", "tools": 527, "queries": len(queries)}
        for name, service in variants.items():
            result[name] = await evaluate(service, queries)
        result["dense"] = await evaluate_dense(index, embedder, queries)
        result["indexing_seconds"] = round(indexing_s, 2)
        await index.close()
    print(json.dumps(result))


def _source(index: EdgeIndex):  # type: ignore[no-untyped-def]
    async def get() -> EdgeIndex:
        return index

    return get


def _name(tool: dict[str, object]) -> str:
    return f"{tool['source_server']['name']}.{tool['original_name']}"  # type: ignore[index]


async def evaluate(service: SearchService, queries: list[dict[str, object]]) -> dict[str, float]:
    totals = [0.0, 0.0, 0.0]
    for q in queries:
        response = await service.search(SearchRequest(query=str(q["query"]), limit=10, strategy="flat"))
        ranked = [_name(t.model_dump()) for t in response.tools]
        for i, value in enumerate(scores(ranked, q["gold_slots"])):  # type: ignore[arg-type]
            totals[i] += value
    n = len(queries)
    return {"recall@1": round(totals[0] / n, 3), "recall@5": round(totals[1] / n, 3), "mrr@10": round(totals[2] / n, 3)}


async def evaluate_dense(index: EdgeIndex, embedder, queries):  # type: ignore[no-untyped-def]
    from toolmesh.index.base import Where

    totals = [0.0, 0.0, 0.0]
    for q in queries:
        vector = [float(x) for x in embedder.embed([str(q["query"])])[0]]
        hits = await index.query(vector, Where(kind="tool"), 10)
        ranked = [f"{h.payload['source_server_name']}.{h.payload['original_name']}" for h in hits]
        for i, value in enumerate(scores(ranked, q["gold_slots"])):
            totals[i] += value
    n = len(queries)
    return {"recall@1": round(totals[0] / n, 3), "recall@5": round(totals[1] / n, 3), "mrr@10": round(totals[2] / n, 3)}


if __name__ == "__main__":
    asyncio.run(main())
