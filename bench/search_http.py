"""Search latency through the product's HTTP API, for ``search_latency.py --http``.

``toolmesh up`` (every role in one process, on fresh embedded NATS and Postgres, as ``load_system``
starts it) aggregates upstream MCP servers (``load_upstreams.py``) whose tools are LiveMCPBench's
(each server ``--tools-each`` of them, wrapping round). A client sends ``POST /api/v1/search`` with
agent-like task texts, one request at a time, each text new to the process:

- ``tasks``: LiveMCPBench's task texts as they are (median 20 words, up to ~90), first asked;
- ``long``: two tasks joined by "Then" with a few filler words spread through them (40-200 words),
  so that neither the text nor its clauses were seen before (the process caches the vectors of
  texts and clauses it embedded).

Scenarios: steady at ``--base-tools`` tools, then while servers register up to ``--tools`` tools,
steady at ``--tools`` tools, then while ``--registering`` more servers register. A scenario ends
when every registered tool is searchable by its vector; the tools indexed per second of each
registration (from registration to the last vector) is printed beside its latencies.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from livemcpbench import DATA
from load_system import Pool, deployment, poll, register_http, upstreams

from tests.retrieval.catalog import read_jsonl

FILLERS = (
    "please kindly carefully quickly then also now first next finally really just simply exactly "
    "properly briefly today again together clearly directly fully"
).split()


def task_texts() -> list[str]:
    return [str(row["query"]) for row in read_jsonl(DATA / "queries.jsonl")]


def long_texts(tasks: list[str], seed: int) -> Iterator[str]:
    """Endless new long texts: two tasks joined, a filler word after about every fifth word."""
    rng = random.Random(seed)
    while True:
        first, second = rng.sample(tasks, 2)
        words = f"{first} Then {second}".split()
        for position in sorted(rng.sample(range(1, len(words)), len(words) // 5), reverse=True):
            words.insert(position, rng.choice(FILLERS))
        yield " ".join(words)


def percentiles(values: list[float], prefix: str) -> dict[str, float]:
    values = sorted(values)
    if not values:
        return {}
    return {
        f"{prefix}_p50": round(values[len(values) // 2], 1),
        f"{prefix}_p95": round(values[max(0, int(len(values) * 0.95) - 1)], 1),
        f"{prefix}_n": len(values),
    }


async def search(api: Pool, text: str) -> float:
    """Milliseconds for one ``POST /api/v1/search`` (the default strategy)."""
    body = json.dumps({"query": text, "limit": 10}).encode()
    started = time.perf_counter()
    status, answer = await api.request("POST", "/api/v1/search", body)
    elapsed = (time.perf_counter() - started) * 1000
    if status != 200:
        raise RuntimeError(f"search: {status} {answer[:200]!r}")
    return elapsed


async def indexed(api: Pool, tools: int) -> bool:
    """Every one of ``tools`` tools is in the catalog with its vector."""
    status, body = await api.request("GET", "/api/v1/search/health")
    health = json.loads(body) if status == 200 else {}
    return bool(health.get("tools") == tools and health.get("tools_without_vector") == 0)


async def register(api: Pool, ports: list[int], first: int, rate: float) -> None:
    """Register one server per port (named by its number from ``first``), ``rate`` a second."""
    started = time.perf_counter()
    for number, port in enumerate(ports):
        await asyncio.sleep(max(0.0, started + number / rate - time.perf_counter()))
        await register_http(api, f"tools{first + number:04d}", port)


async def steady(api: Pool, tasks: list[str], texts: Iterator[str], label: str, count: int) -> dict[str, float]:
    """``tasks`` then ``count`` long texts, one at a time."""
    result = percentiles([await search(api, text) for text in tasks], f"{label}_tasks_ms")
    result.update(percentiles([await search(api, next(texts)) for _ in range(count)], f"{label}_long_ms"))
    return result


async def registering(
    api: Pool, ports: list[int], first: int, total: int, texts: Iterator[str], label: str, rate: float
) -> dict[str, Any]:
    """Register servers at ``ports`` while searching without pause, until all ``total`` tools have vectors."""
    latencies: list[float] = []
    done = asyncio.Event()

    async def searcher() -> None:
        while not done.is_set():
            latencies.append(await search(api, next(texts)))

    started = time.perf_counter()
    task = asyncio.create_task(searcher())  # its own connection: the pool opens one per request in flight
    try:
        await register(api, ports, first, rate)
        await poll(lambda: indexed(api, total), 900, f"{total} tools indexed", every=0.25)
    finally:
        done.set()
        await task
    seconds = time.perf_counter() - started
    added = total - first * total // (first + len(ports))
    return {
        **percentiles(latencies, f"{label}_long_ms"),
        f"{label}_servers": len(ports),
        f"{label}_seconds": round(seconds, 1),
        f"{label}_tools_per_s": round(added / seconds, 1),
    }


async def run(args: Any) -> dict[str, Any]:
    """Every scenario, as one dict."""
    each = args.tools_each
    base, full = args.base_tools // each, args.tools // each
    servers = full + args.registering
    tasks = task_texts()
    texts = long_texts(tasks, seed=5)
    result: dict[str, Any] = {"mode": "http", "tools_each": each, "queries": len(tasks)}
    env = {
        "MCP_AGGREGATOR_MAX_SERVERS": str(servers + 10),
        "TOOLMESH_NAMESPACE_MAX_SERVERS": str(servers + 10),
        "TOOLMESH_NAMESPACE_MAX_TOOLS": str(servers * each),
        "TOOLMESH_MAX_TOTAL_TOOLS": str(servers * each),
        "TOOLMESH_MAX_SESSIONS_PER_WORKER": str(servers + 10),
    }
    with (
        upstreams(servers, each, DATA / "tools.jsonl") as (ports, _),
        tempfile.TemporaryDirectory() as tmp,
    ):
        async with deployment(Path(tmp), ["up"], env) as deploy:
            api = Pool(deploy.port)
            try:
                await register(api, ports[:base], 0, 1000.0)
                await poll(lambda: indexed(api, base * each), 900, "the base catalog indexed", every=0.5)
                scenarios = (
                    lambda: steady(api, tasks, texts, f"steady_{base * each}", args.http_long),
                    lambda: registering(
                        api, ports[base:full], base, full * each, texts, f"to_{full * each}", args.rate
                    ),
                    lambda: steady(api, [], texts, f"steady_{full * each}", args.http_long),  # tasks: asked before
                    lambda: registering(
                        api, ports[full:], full, servers * each, texts, f"registering_{args.registering}", args.rate
                    ),
                )
                for scenario in scenarios:
                    result.update(await scenario())
                    print(json.dumps(result), file=sys.stderr, flush=True)  # so far, should a later one fail
            finally:
                api.close()
    return result
