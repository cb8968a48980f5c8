"""Search latency at 10,000 tools (p50/p95, with filters), indexing throughput, and the time to
classify 50 tools (BR-004 target: under 60 s). Embedded index (qdrant-edge), real model. One JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_common import livemcp_servers, load_index

from toolmesh.contracts.events import DiscoveredTool
from toolmesh.contracts.search import SearchRequest
from toolmesh.embed.model import load_embedder
from toolmesh.index.edge import EdgeIndex
from toolmesh.search.service import SearchService
from toolmesh.skills.taxonomy import load_taxonomy
from toolmesh_classifier.classifiers import EmbeddingClassifier
from toolmesh_classifier.worker import BATCH_SIZE, CONCURRENT_BATCHES

TOOLS = 10_000
SERVERS = 50
VERBS = "create read update delete list search get send fetch run query export import sync archive".split()
NOUNS = (
    "issue file record message event invoice user repository page image report table ticket calendar "
    "document chart order product contact note task flight hotel weather price"
).split()
QUERIES = [
    "create a github issue",
    "send a message to the team",
    "search the web for news",
    "read a file from disk",
    "query the database table",
    "weather forecast for tomorrow",
    "book a hotel",
    "export the report as pdf",
]


def synthetic() -> dict[str, list[DiscoveredTool]]:
    rng = random.Random(7)
    servers: dict[str, list[DiscoveredTool]] = {}
    for s in range(SERVERS):
        tools = []
        for t in range(TOOLS // SERVERS):
            verb, noun, other = rng.choice(VERBS), rng.choice(NOUNS), rng.choice(NOUNS)
            tools.append(
                DiscoveredTool(
                    original_name=f"{verb}_{noun}_{t}",
                    description=f"{verb.capitalize()} a {noun} with its {other} in service {s}.",
                    input_schema={"type": "object", "properties": {f"{noun}_id": {}, other: {}}},
                )
            )
        servers[f"server-{s:02d}"] = tools
    return servers


async def classify_50() -> float:
    embedder = load_embedder()
    assert embedder is not None
    tools = [t for ts in livemcp_servers().values() for t in ts][:50]
    started = time.perf_counter()
    classifier = EmbeddingClassifier(embedder, load_taxonomy())
    gate = asyncio.Semaphore(CONCURRENT_BATCHES)

    async def one(batch: list[DiscoveredTool]) -> None:
        async with gate:
            await classifier.classify("bench", batch)

    await asyncio.gather(*(one(tools[i : i + BATCH_SIZE]) for i in range(0, len(tools), BATCH_SIZE)))
    return time.perf_counter() - started


async def main() -> None:
    load_before = os.getloadavg()[0]
    embedder = load_embedder()
    servers = synthetic()
    with tempfile.TemporaryDirectory() as tmp:
        index = EdgeIndex(Path(tmp), 384)
        started = time.perf_counter()
        await load_index(index, embedder, servers)
        indexing = time.perf_counter() - started

        async def source() -> EdgeIndex:
            return index

        # As deployed (repeated queries answered from the query-vector cache), and with every query
        # embedded afresh ("uncached": what a query never seen before costs).
        services = {
            "": SearchService(source, embedder),
            "uncached_": SearchService(source, embedder, query_cache_size=0),
        }
        latencies: dict[str, list[float]] = {}
        for prefix, service in services.items():
            await service.search(SearchRequest(query="warm up"))
            for round_ in range(25):
                for query in QUERIES:
                    for name, request in (
                        ("flat", SearchRequest(query=query, strategy="flat")),
                        ("hierarchical", SearchRequest(query=query, strategy="hierarchical", skill_threshold=0.3)),
                        (
                            "flat_server_filter",
                            SearchRequest(query=query, strategy="flat", server_filter=[f"server-{round_ % 50:02d}"]),
                        ),
                    ):
                        t0 = time.perf_counter()
                        await service.search(request)
                        latencies.setdefault(prefix + name, []).append((time.perf_counter() - t0) * 1000)
        await index.close()
    result: dict[str, object] = {
        "benchmark": "search_latency",
        "tools": TOOLS,
        "servers": SERVERS,
        "indexing_tools_per_s": round(TOOLS / indexing, 1),
        "indexing_seconds": round(indexing, 1),
    }
    for name, values in latencies.items():
        values.sort()
        result[f"{name}_p50_ms"] = round(statistics.median(values), 2)
        result[f"{name}_p95_ms"] = round(values[int(len(values) * 0.95) - 1], 2)
    result["classify_50_tools_s"] = round(await classify_50(), 2)
    result["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]  # the host is shared
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
