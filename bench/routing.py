"""Tool-call routing overhead: direct MCP calls vs ``POST /api/v1/tools/call`` and ``/mcp`` through toolmesh.

    python bench/routing.py [--calls-c1 N] [--calls N] [--mcp-calls-c1 N] [--mcp-calls N]
                            [--concurrency 1,16,64]

Starts NATS and Postgres (``toolmesh_cli.embedded``), runs every toolmesh role in ONE subprocess
(``toolmesh up``), registers the demo peer (a Python MCP server over stdio) and drives load from
this process with a small keep-alive HTTP/1.1 client over asyncio streams (an httpx client would
measure itself). The same calls go to a second copy of the demo peer over the ``mcp`` client
directly. Prints ONE JSON line: latency percentiles, throughput, added latency, and CPU seconds
per call of the toolmesh process (from psutil). Targets are not asserted here.

The ``mcp`` column calls the same tool through toolmesh's own MCP front door (``/mcp?mode=all``,
Streamable HTTP, bearer token) with the ``mcp`` SDK client: one session, concurrent ``call_tool``s.
That client costs far more CPU than the raw HTTP client above, and it shares the machine with
toolmesh, so the column also reports this process's own CPU per call (``bench_cpu_us_per_call``)
next to toolmesh's; it runs fewer calls (``--mcp-calls-c1``/``--mcp-calls``) to stay short.
The ``direct_http`` column is that same SDK client calling the demo peer over Streamable HTTP
directly (its own process); ``mcp.ratio_to_direct_http`` is ``/mcp``'s throughput over it
(``mcp_ratio_to_direct_http`` in the partial line of ``--targets mcp,direct_http``). The
``mcp_2026`` and ``direct_http_2026`` columns (``--targets mcp_2026,direct_http_2026``) are the
same two in the 2026-07-28 era (``server/discover``, every call a stateless POST), with
``mcp_2026_ratio_to_direct_http_2026``; ``post_answers`` counts the POSTs each SDK column made and
how many were answered with an SSE stream (a plain ``tools/call`` should get none).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from routing_targets import (
    ARGUMENTS,
    DEMO,
    MODERN,
    TOKEN,
    TOOL,
    Call,
    DirectHttpMcp,
    DirectMcp,
    HttpConnection,
    McpFrontDoor,
    RestApi,
    Target,
)

from toolmesh.platform import processes
from toolmesh.platform.polling import poll_until
from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port


def note(message: str) -> None:
    """Progress on stderr (stdout carries the one JSON line)."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    return processes.cpu_seconds(pid)


def per_call_us(used: float, calls: int) -> float:
    """CPU seconds over ``calls`` calls, as microseconds per call."""
    return round(used / calls * 1e6, 1)


def added_vs(column: dict[str, dict[str, float]], direct: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Added p50/p95 latency and throughput ratio of a column against the direct column, per level."""
    return {
        level: {
            "p50_ms": round(column[level]["p50_ms"] - direct[level]["p50_ms"], 3),
            "p95_ms": round(column[level]["p95_ms"] - direct[level]["p95_ms"], 3),
            "throughput_ratio": round(column[level]["throughput_per_s"] / direct[level]["throughput_per_s"], 3),
        }
        for level in column
    }


def ratios(column: dict[str, dict[str, float]], base: dict[str, dict[str, float]]) -> dict[str, float]:
    """Throughput of a column over another's, per level."""
    return {level: round(column[level]["throughput_per_s"] / base[level]["throughput_per_s"], 3) for level in column}


def children(pid: int) -> list[int]:
    """Direct children of ``pid``."""
    return processes.children(pid)


async def run_load(target: Target, concurrency: int, calls: int) -> dict[str, float]:
    """``calls`` calls spread over ``concurrency`` callers; latency percentiles and throughput."""
    callers = await target.callers(concurrency)
    latencies: list[float] = []
    per_caller = [calls // concurrency + (1 if i < calls % concurrency else 0) for i in range(concurrency)]

    async def drive(call: Call, count: int) -> None:
        for _ in range(count):
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(drive(call, count) for call, count in zip(callers, per_caller, strict=True)))
    elapsed = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "calls": calls,
        "p50_ms": round(cuts[49] * 1000, 3),
        "p95_ms": round(cuts[94] * 1000, 3),
        "p99_ms": round(cuts[98] * 1000, 3),
        "throughput_per_s": round(calls / elapsed, 1),
    }


# -- the system under test ------------------------------------------------------------------------


def spawn_toolmesh(work: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``toolmesh up`` (all roles, one process), logging to ``work/toolmesh.log``."""
    with (work / "toolmesh.log").open("wb") as log:
        return processes.spawn(
            [sys.executable, "-m", "toolmesh_cli.main", "up", "--data-dir", str(work / "data")], env=env, stdout=log
        )


@contextlib.asynccontextmanager
async def toolmesh_up(
    work: Path, nats_url: str, database_url: str, port: int
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """``toolmesh up`` as one subprocess on the given backends; stopped with SIGTERM."""
    env = {
        **os.environ,
        "TOOLMESH_NATS_URL": nats_url,
        "TOOLMESH_DATABASE_URL": database_url,
        "TOOLMESH_ADMIN_TOKEN": TOKEN,
        "TOOLMESH_PORT": str(port),
        "TOOLMESH_LOG_LEVEL": os.environ.get("TOOLMESH_LOG_LEVEL", "INFO"),
        "MCP_CREDENTIAL_KEY": secrets.token_urlsafe(32),
        "TOOLMESH_RATE_LIMIT_PER_SECOND": "0",  # measure routing, not the per-principal limit
        "TOOLMESH_NAMESPACE_CALLS_PER_SECOND": "0",  # nor the namespace's
    }
    process = spawn_toolmesh(work, env)
    try:
        yield process
    finally:
        await processes.stop(process, signal.SIGTERM, 30)


async def register_demo(host: str, port: int) -> None:
    """Register the demo peer and wait until it is routable."""
    body = json.dumps(
        {
            "name": "demo",
            "transport_type": "STDIO",
            "connection_config": {"command": sys.executable, "args": [str(DEMO), "--transport", "stdio"]},
        }
    ).encode()
    deadline = time.monotonic() + 60
    connection = await poll_until(lambda: HttpConnection.open(host, port), 60, interval=0.2, retry_on=(OSError,))
    if connection is None:
        raise RuntimeError(f"toolmesh did not listen on {host}:{port}")
    try:
        status, answer = await connection.post("/api/v1/aggregator/servers", body, TOKEN)
        if status != 201:
            raise RuntimeError(f"registration failed: {status} {answer!r}")
        probe = json.dumps({"name": f"demo.{TOOL}", "arguments": ARGUMENTS}).encode()

        async def routable() -> bool:
            return (await connection.post("/api/v1/tools/call", probe, TOKEN))[0] == 200

        if not await poll_until(routable, deadline - time.monotonic(), interval=0.2):
            raise RuntimeError("the demo peer did not become routable")
    finally:
        await connection.close()


def cpu_probes(toolmesh_pid: int, http_peer_pid: int, nats_pid: int | None) -> dict[str, Callable[[], float]]:
    """The CPU seconds so far of toolmesh, of its children (the upstream), of this process, of the direct
    HTTP peer and, when it runs as a process of its own, of NATS."""
    peer = children(toolmesh_pid)
    probes: dict[str, Callable[[], float]] = {
        "toolmesh": lambda: cpu_seconds(toolmesh_pid),
        "upstream": lambda: sum(cpu_seconds(p) for p in peer),
        "bench": lambda: cpu_seconds(os.getpid()),
        "http_peer": lambda: cpu_seconds(http_peer_pid),
    }
    if nats_pid:
        probes["nats"] = lambda: cpu_seconds(nats_pid)
    return probes


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    levels = [int(c) for c in args.concurrency.split(",")]
    counts = {
        "direct": {c: (args.calls_c1 if c == 1 else args.calls) for c in levels},
        "rest": {c: (args.calls_c1 if c == 1 else args.calls) for c in levels},
        "mcp": {c: (args.mcp_calls_c1 if c == 1 else args.mcp_calls) for c in levels},
        "direct_http": {c: (args.mcp_calls_c1 if c == 1 else args.mcp_calls) for c in levels},
    }
    counts["mcp_2026"] = counts["direct_http_2026"] = counts["mcp"]
    wanted = args.targets.split(",")
    with tempfile.TemporaryDirectory(prefix="toolmesh-bench-") as tmp:
        work = Path(tmp)
        async with EmbeddedNats(work / "nats") as nats, EmbeddedPostgres(work / "pg") as postgres:
            database_url = await postgres.ensure_database("toolmesh")
            host, port = "127.0.0.1", free_port()
            note(f"backends up; starting toolmesh on port {port}")
            direct = DirectMcp()
            await direct.start()
            async with contextlib.AsyncExitStack() as cleanup:
                cleanup.push_async_callback(direct.close)
                process = await cleanup.enter_async_context(toolmesh_up(work, nats.url, database_url, port))
                await register_demo(host, port)
                note("demo peer registered and routable")
                rest = RestApi(host, port)
                cleanup.push_async_callback(rest.close)
                front = McpFrontDoor(host, port)
                cleanup.push_async_callback(front.close)
                await front.start(time.monotonic() + 60)
                note(f"/mcp session open; the tool is {front.tool!r}")
                direct_http = DirectHttpMcp(free_port())
                cleanup.push_async_callback(direct_http.close)
                await direct_http.start(time.monotonic() + 60)
                modern: list[McpFrontDoor | DirectHttpMcp] = []
                if {"mcp_2026", "direct_http_2026"} & set(wanted):
                    modern = [McpFrontDoor(host, port, MODERN), DirectHttpMcp(free_port(), MODERN)]
                    for column in modern:
                        cleanup.push_async_callback(column.close)
                        await column.start(time.monotonic() + 60)
                targets: list[Target] = [t for t in (direct, rest, front, direct_http, *modern) if t.name in wanted]
                results: dict[str, dict[str, Any]] = {t.name: {} for t in targets}
                assert direct_http.process is not None
                probes = cpu_probes(process.pid, direct_http.process.pid, nats.pid)
                # cpu[target][probe][level]: CPU microseconds per call of that process
                cpu: dict[str, dict[str, dict[str, float]]] = {t.name: {p: {} for p in probes} for t in targets}
                for target in targets:  # warm up every path
                    await run_load(target, 4, args.warmup)
                for level in levels:
                    for target in targets:
                        calls = counts[target.name][level]
                        before = {name: probe() for name, probe in probes.items()}
                        results[target.name][f"c{level}"] = await run_load(target, level, calls)
                        for name, probe in probes.items():
                            cpu[target.name][name][f"c{level}"] = per_call_us(probe() - before[name], calls)
                        note(f"{target.name} c{level}: {results[target.name][f'c{level}']}")
    sse = {t.name: {"posts": t.streams.posts, "sse": t.streams.sse} for t in targets if hasattr(t, "streams")}
    if {t.name for t in targets} != {"direct", "rest", "mcp", "direct_http"}:
        return partial_report(results, cpu) | {"post_answers": sse}
    return full_report(results, cpu, front.tool)


def partial_report(results: dict[str, dict[str, Any]], cpu: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """The report of a run that measured some of the columns only."""
    partial: dict[str, Any] = {"bench": "routing", "partial": True, **results, "cpu_us_per_call": cpu}
    if {"mcp", "direct_http"} <= results.keys():
        partial["mcp_ratio_to_direct_http"] = ratios(results["mcp"], results["direct_http"])
    if {"mcp_2026", "direct_http_2026"} <= results.keys():
        partial["mcp_2026_ratio_to_direct_http_2026"] = ratios(results["mcp_2026"], results["direct_http_2026"])
    return partial


def full_report(
    results: dict[str, dict[str, Any]], cpu: dict[str, dict[str, dict[str, float]]], mcp_tool: str
) -> dict[str, Any]:
    """The report of a run that measured every column; ``mcp_tool`` is the tool /mcp called."""
    mcp_column: dict[str, Any] = {
        "client": McpFrontDoor.client,
        "tool": mcp_tool,
        **results["mcp"],
        "added": added_vs(results["mcp"], results["direct"]),
        "toolmesh_cpu_us_per_call": cpu["mcp"]["toolmesh"],
        "bench_cpu_us_per_call": cpu["mcp"]["bench"],
        "upstream_cpu_us_per_call": cpu["mcp"]["upstream"],
    }
    if "nats" in cpu["mcp"]:
        mcp_column["nats_cpu_us_per_call"] = cpu["mcp"]["nats"]
    mcp_column["ratio_to_direct_http"] = ratios(results["mcp"], results["direct_http"])
    direct_http_column = {
        "client": McpFrontDoor.client,
        **results["direct_http"],
        "server_cpu_us_per_call": cpu["direct_http"]["http_peer"],
        "bench_cpu_us_per_call": cpu["direct_http"]["bench"],
    }
    return {
        "bench": "routing",
        "tool": TOOL,
        "upstream": "demo_server.py over stdio",
        "direct": results["direct"],
        "rest": results["rest"],
        "mcp": mcp_column,
        "direct_http": direct_http_column,
        "added": added_vs(results["rest"], results["direct"]),  # of the rest column
        # of the rest column (its load generator is the raw HTTP/1.1 client above):
        "toolmesh_cpu_us_per_call": cpu["rest"]["toolmesh"],
        "upstream_cpu_us_per_call": cpu["rest"]["upstream"],
        "nats_cpu_us_per_call": cpu["rest"].get("nats", {}),
        "rest_bench_cpu_us_per_call": cpu["rest"]["bench"],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls-c1", type=int, default=1000, help="calls at concurrency 1")
    parser.add_argument("--calls", type=int, default=3000, help="calls at each higher concurrency")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--mcp-calls-c1", type=int, default=300, help="/mcp calls at concurrency 1")
    parser.add_argument("--mcp-calls", type=int, default=1000, help="/mcp calls at each higher concurrency")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--targets", default="direct,rest,mcp,direct_http", help="columns to measure")
    print(json.dumps(asyncio.run(bench(parser.parse_args()))), flush=True)


if __name__ == "__main__":
    main()
