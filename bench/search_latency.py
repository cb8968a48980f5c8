"""Search latency and index freshness while the catalog changes. One JSON line.

1. preload: ``--tools`` synthetic tools on ``--servers`` servers go through the index projection
   (the indexer's code) and the product's classifier, as events in stream order;
2. steady: search p50/p95 at that size (flat, hierarchical, filtered by server; repeated queries
   answered from the query cache, and every query embedded afresh: "uncached");
3. registration: ``--registering`` more servers (``--tools-each`` tools each) arrive at ``--rate``
   servers per second; each one's events, then its classification (batches of 10, as the
   classifier-worker publishes them), queue up for the projection like messages of the event
   stream, while a client searches without pause and a probe measures, per server, the time from
   its tool snapshot entering the stream to its probe tool being found by search (index lag). A
   tool is found by its words first and by its vector once the bulk lane embedded it: the most
   tools waiting for a vector and how long after the last server they all had one are printed too.

The projection, the catalog publisher, the checkpoint flusher and the searches share one event loop,
as in ``toolmesh up``. ``--backend qdrant-local`` stores the index in qdrant-client's local mode: no
package ships a Qdrant server binary, so that stands in for one (searches read the in-memory
catalog either way; the backend only changes indexing).

The in-process steady measurement also times LiveMCPBench's task texts (``tasks``: long,
multi-clause, as agents send them). ``--http`` measures instead through the product's HTTP API,
``toolmesh up`` and ``POST /api/v1/search``, with task texts and longer ones, at ``--base-tools`` and
``--tools`` tools, steady and while servers register (``search_http``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from livemcpbench import DATA
from qdrant_client import AsyncQdrantClient
from search_http import run as run_http

from tests.retrieval.catalog import classifications, one_server, read_jsonl
from toolmesh.contracts.events import DiscoveredTool
from toolmesh.contracts.search import SearchRequest
from toolmesh.embed.lane import EmbeddingLanes
from toolmesh.embed.model import DIMENSIONS, load_embedder
from toolmesh.index.base import ToolIndex
from toolmesh.platform.polling import poll_until
from toolmesh.search.service import SearchService
from toolmesh.skills.taxonomy import load_taxonomy
from toolmesh_classifier.classifiers import EmbeddingClassifier
from toolmesh_projector.index_projection import IndexProjection
from toolmesh_projector.vector_index.edge import EdgeIndex
from toolmesh_projector.vector_index.qdrant import QdrantIndex

PROBE_SECONDS = 120.0
"""How long a probe waits for an arriving tool to become searchable."""
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


def synthetic(servers: int, per_server: int, prefix: str, seed: int) -> dict[str, list[DiscoveredTool]]:
    """Servers of plausible tools; each server's last tool is a probe with a unique word in its name."""
    rng = random.Random(seed)
    result: dict[str, list[DiscoveredTool]] = {}
    for s in range(servers):
        tools = []
        for t in range(per_server - 1):
            verb, noun, other = rng.choice(VERBS), rng.choice(NOUNS), rng.choice(NOUNS)
            properties = {
                f"{noun}_id": {"type": "string", "description": f"Id of the {noun}."},
                other: {"type": "string", "description": f"The {other} to use."},
            }
            tools.append(
                DiscoveredTool(
                    original_name=f"{verb}_{noun}_{t}",
                    description=f"{verb.capitalize()} a {noun} with its {other} in service {s}.",
                    input_schema={"type": "object", "properties": properties},
                )
            )
        tools.append(DiscoveredTool(original_name=f"probe{prefix}{s}", description="Probe tool for freshness."))
        result[f"{prefix}-{s:04d}"] = tools
    return result


def percentiles(values: list[float], prefix: str) -> dict[str, float]:
    if not values:
        return {}
    values = sorted(values)
    return {
        f"{prefix}_p50": round(statistics.median(values), 2),
        f"{prefix}_p95": round(values[max(0, int(len(values) * 0.95) - 1)], 2),
        f"{prefix}_max": round(values[-1], 2),
        f"{prefix}_n": len(values),
    }


class Stream:
    """Events in arrival order, applied one at a time like the indexer's durable consumer."""

    def __init__(self, projection: IndexProjection) -> None:
        self.projection = projection
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.seq = projection.state.last_seq

    async def run(self) -> None:
        while True:
            event = await self.queue.get()
            self.seq += 1
            await self.projection.apply(event, self.seq)
            self.queue.task_done()


async def open_backend(kind: str, path: Path) -> ToolIndex:
    if kind == "edge":
        return EdgeIndex(path, DIMENSIONS)
    local = QdrantIndex(AsyncQdrantClient(location=":memory:"), DIMENSIONS)
    await local.ensure_collections()
    return local


async def feed(stream: Stream, classifier: EmbeddingClassifier, servers: dict[str, list[DiscoveredTool]]) -> None:
    for name, tools in servers.items():
        for event in one_server(name, tools):
            stream.queue.put_nowait(event)
        for event in await classifications(classifier, name, tools):
            stream.queue.put_nowait(event)


async def measure_steady(service: SearchService, uncached: SearchService, rounds: int) -> dict[str, float]:
    result: dict[str, float] = {}
    for prefix, svc in (("steady", service), ("steady_uncached", uncached)):
        latencies: dict[str, list[float]] = {}
        await svc.search(SearchRequest(query="warm up"))
        for task in read_jsonl(DATA / "queries.jsonl"):  # each asked once: new to the query cache
            t0 = time.perf_counter()
            await svc.search(SearchRequest(query=str(task["query"])))
            latencies.setdefault("tasks", []).append((time.perf_counter() - t0) * 1000)
        for round_ in range(rounds):
            for query in QUERIES:
                for name, request in (
                    ("flat", SearchRequest(query=query, strategy="flat")),
                    ("hierarchical", SearchRequest(query=query)),
                    ("server_filter", SearchRequest(query=query, server_filter=[f"base-{round_ % 50:04d}"])),
                ):
                    t0 = time.perf_counter()
                    await svc.search(request)
                    latencies.setdefault(name, []).append((time.perf_counter() - t0) * 1000)
        for name, values in latencies.items():
            result.update(percentiles(values, f"{prefix}_{name}_ms"))
    return result


async def register_while_searching(
    stream: Stream, classifier: EmbeddingClassifier, service: SearchService, args: argparse.Namespace
) -> dict[str, Any]:
    arriving = synthetic(args.registering, args.tools_each, "new", seed=11)
    latencies: list[float] = []
    lags: list[float] = []
    behind: list[int] = []
    done = asyncio.Event()

    async def searcher() -> None:
        rng = random.Random(3)
        while not done.is_set():
            t0 = time.perf_counter()
            await service.search(SearchRequest(query=f"{rng.choice(QUERIES)} {rng.randrange(10_000)}"))
            latencies.append((time.perf_counter() - t0) * 1000)
            behind.append(stream.projection.vectors_behind)
            await asyncio.sleep(0.01)

    async def probe(name: str, tool: str, since: float) -> None:
        request = SearchRequest(query=tool, strategy="flat", server_filter=[name], limit=1)

        async def searchable() -> bool:
            found = await service.search(request)
            return bool(found.tools and found.tools[0].original_name == tool)

        if not await poll_until(searchable, PROBE_SECONDS):
            raise RuntimeError(f"{tool} of {name} not searchable after {PROBE_SECONDS:.0f}s")
        lags.append(time.perf_counter() - since)

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        search_task = group.create_task(searcher())
        probes = []
        for number, (name, tools) in enumerate(arriving.items()):
            await asyncio.sleep(max(0.0, started + number / args.rate - time.perf_counter()))
            for event in one_server(name, tools):
                stream.queue.put_nowait(event)
            probes.append(group.create_task(probe(name, tools[-1].original_name, time.perf_counter())))
            # The classifier-worker classifies the snapshot while the indexer indexes it.
            group.create_task(_classify(stream, classifier, name, tools))
        await asyncio.gather(*probes)
        await stream.queue.join()
        last_server = time.perf_counter()
        await all_embedded(stream.projection)
        vectors_after = time.perf_counter() - last_server
        done.set()
        await search_task
    elapsed = time.perf_counter() - started
    return {
        "registering_servers": args.registering,
        "registering_tools": args.registering * args.tools_each,
        "registering_rate_servers_per_s": args.rate,
        "registration_seconds": round(elapsed, 1),
        **percentiles(latencies, "during_registration_search_ms"),
        **percentiles([lag * 1000 for lag in lags], "index_lag_ms"),
        "tools_without_vector_max": max(behind, default=0),
        "all_vectors_seconds_after_last_server": round(vectors_after, 1),
    }


async def all_embedded(projection: IndexProjection) -> None:
    """Wait until every indexed tool has its vector."""

    async def caught_up() -> bool:
        return projection.vectors_behind == 0

    if not await poll_until(caught_up, PROBE_SECONDS * 5):
        raise RuntimeError(f"{projection.vectors_behind} tools still without a vector")


async def _classify(stream: Stream, classifier: EmbeddingClassifier, name: str, tools: list[DiscoveredTool]) -> None:
    for event in await classifications(classifier, name, tools):
        stream.queue.put_nowait(event)


async def main(args: argparse.Namespace) -> None:
    load_before = os.getloadavg()[0]
    if args.http:
        result = {"benchmark": "search_latency", **await run_http(args)}
        result["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
        print(json.dumps(result))
        return
    embedder = load_embedder()
    if embedder is None:
        raise SystemExit("the embedding model did not load")
    lanes = EmbeddingLanes()  # one lane for the indexer and the classifier, as in one process
    classifier = EmbeddingClassifier(embedder, load_taxonomy(), lanes)
    result: dict[str, Any] = {
        "benchmark": "search_latency",
        "backend": "qdrant-edge (embedded)" if args.backend == "edge" else "qdrant-client local mode (stand-in)",
        "tools": args.tools,
        "servers": args.servers,
    }
    with tempfile.TemporaryDirectory() as tmp:
        index = await open_backend(args.backend, Path(tmp))
        projection = IndexProjection(index, embedder, load_taxonomy(), lanes=lanes)
        await projection.start()
        stream = Stream(projection)
        stop = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            workers = [
                group.create_task(stream.run()),
                group.create_task(projection.table.run_publisher(stop)),
                group.create_task(projection.run_flusher(stop)),
                group.create_task(projection.run_embedder(stop)),
            ]
            started = time.perf_counter()
            await feed(stream, classifier, synthetic(args.servers, args.tools // args.servers, "base", seed=7))
            await stream.queue.join()
            await all_embedded(projection)
            result["preload_seconds"] = round(time.perf_counter() - started, 1)
            result["preload_tools_per_s"] = round(args.tools / (time.perf_counter() - started), 1)
            await asyncio.sleep(0.5)  # the publisher catches up
            service = SearchService(projection.table.catalog, embedder)
            # Every query embedded afresh: neither the service's query cache nor the process's text cache.
            model = getattr(embedder, "inner", embedder)
            uncached = SearchService(projection.table.catalog, model, query_cache_size=0)
            result.update(await measure_steady(service, uncached, args.rounds))
            if args.registering:
                result.update(await register_while_searching(stream, classifier, service, args))
            stop.set()
            workers[0].cancel()
        await index.close()
    result["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]  # the host is shared
    print(json.dumps(result))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--registering", type=int, default=500)
    parser.add_argument("--tools-each", type=int, default=20)
    parser.add_argument("--rate", type=float, default=5.0, help="servers registering per second")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--backend", choices=("edge", "qdrant-local"), default="edge")
    parser.add_argument("--http", action="store_true", help="through toolmesh up's HTTP API (search_http)")
    parser.add_argument("--base-tools", type=int, default=2_500, help="--http: the first steady catalog")
    parser.add_argument("--http-long", type=int, default=200, help="--http: long texts per steady scenario")
    asyncio.run(main(parser.parse_args()))
