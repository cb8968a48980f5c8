"""One tool call three ways: the public NATS API, the internal request path, and the REST API.

    python bench/nats_api.py [--calls-c1 N] [--calls N] [--concurrency 1,16,64]

Starts NATS and Postgres (``toolmesh_cli.embedded``), runs every toolmesh role in ONE subprocess
(``toolmesh up``), registers the demo peer (a Python MCP server over stdio) and calls its ``echo``:

* ``nats_api``: a NATS request on ``toolmesh.api.v1.tools.call`` (faststream in the gateway:
  payload validation, bearer key, routing, then the internal request below), nats-py client;
* ``internal``: the gateway's own hot path alone, a raw nats-py request on
  ``toolmesh.rpc.<server_id>.call`` straight to the session-worker holding the server (no
  validation, no authentication: this bench process plays the gateway);
* ``rest``: ``POST /api/v1/tools/call`` with the cheap keep-alive HTTP/1.1 client of routing.py.

Prints ONE JSON line: p50/p95/p99 and throughput per concurrency, and CPU microseconds per call
of the toolmesh process and of this (load-generating) process. Targets are not asserted here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from routing import cpu_seconds, note, per_call_us, register_demo, run_load, toolmesh_up
from routing_targets import ARGUMENTS, TOKEN, TOOL, Call, RestApi, Target

from toolmesh.platform.polling import poll_until
from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port

API_CALL = "toolmesh.api.v1.tools.call"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


class NatsApi:
    """``toolmesh.api.v1.tools.call`` with the bearer key in the headers."""

    name = "nats_api"

    def __init__(self, nc: NATS) -> None:
        self._nc = nc
        self._body = json.dumps({"name": f"demo.{TOOL}", "arguments": ARGUMENTS}).encode()

    async def callers(self, n: int) -> list[Call]:
        async def call() -> None:
            reply = json.loads((await self._nc.request(API_CALL, self._body, timeout=30, headers=HEADERS)).data)
            if not reply.get("ok"):
                raise RuntimeError(f"NATS API call failed: {reply}")

        return [call] * n

    async def close(self) -> None:
        return None


class InternalRpc:
    """``toolmesh.rpc.<server_id>.call``: what the gateway sends the session-worker for each call."""

    name = "internal"

    def __init__(self, nc: NATS, server_id: str) -> None:
        self._nc = nc
        self._subject = f"toolmesh.rpc.{server_id}.call"
        self._body = json.dumps({"tool": TOOL, "arguments": ARGUMENTS, "timeout_seconds": 60}).encode()

    async def callers(self, n: int) -> list[Call]:
        async def call() -> None:
            reply = json.loads((await self._nc.request(self._subject, self._body, timeout=30)).data)
            if not reply.get("ok"):
                raise RuntimeError(f"internal call failed: {reply}")

        return [call] * n

    async def close(self) -> None:
        return None


async def demo_server_id(nc: NATS) -> str:
    """The demo peer's id, read through the NATS API (``servers.list``)."""

    async def listed() -> str | None:
        reply = await nc.request("toolmesh.api.v1.servers.list", b"{}", timeout=5, headers=HEADERS)
        servers = json.loads(reply.data)["result"]["servers"]
        return str(servers[0]["id"]) if servers else None

    if server_id := await poll_until(listed, 30, interval=0.2, retry_on=(nats.errors.Error,)):
        return server_id
    raise RuntimeError("the NATS API did not list the demo peer")


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    levels = [int(c) for c in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="toolmesh-bench-") as tmp:
        work = Path(tmp)
        async with EmbeddedNats(work / "nats") as server, EmbeddedPostgres(work / "pg") as postgres:
            database_url = await postgres.ensure_database("toolmesh")
            host, port = "127.0.0.1", free_port()
            note(f"backends up; starting toolmesh on port {port}")
            async with contextlib.AsyncExitStack() as cleanup:
                process = await cleanup.enter_async_context(toolmesh_up(work, server.url, database_url, port))
                await register_demo(host, port)
                nc = await nats.connect(server.url)
                cleanup.push_async_callback(nc.close)
                server_id = await demo_server_id(nc)
                note(f"demo peer {server_id} registered and routable")
                rest = RestApi(host, port)
                cleanup.push_async_callback(rest.close)
                targets: list[Target] = [NatsApi(nc), InternalRpc(nc, server_id), rest]
                probes: dict[str, Callable[[], float]] = {
                    "toolmesh": lambda: cpu_seconds(process.pid),
                    "bench": lambda: cpu_seconds(os.getpid()),
                }
                results: dict[str, dict[str, Any]] = {t.name: {} for t in targets}
                cpu: dict[str, dict[str, dict[str, float]]] = {t.name: {p: {} for p in probes} for t in targets}
                for target in targets:
                    await run_load(target, 4, args.warmup)
                for level in levels:
                    calls = args.calls_c1 if level == 1 else args.calls
                    for target in targets:
                        before = {name: probe() for name, probe in probes.items()}
                        results[target.name][f"c{level}"] = await run_load(target, level, calls)
                        for name, probe in probes.items():
                            cpu[target.name][name][f"c{level}"] = per_call_us(probe() - before[name], calls)
                        note(f"{target.name} c{level}: {results[target.name][f'c{level}']}")
    return {
        "bench": "nats_api",
        "tool": TOOL,
        "upstream": "demo_server.py over stdio",
        **{name: {**levels_, "cpu_us_per_call": cpu[name]} for name, levels_ in results.items()},
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls-c1", type=int, default=500, help="calls at concurrency 1")
    parser.add_argument("--calls", type=int, default=2000, help="calls at each higher concurrency")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--warmup", type=int, default=200)
    print(json.dumps(asyncio.run(bench(parser.parse_args()))), flush=True)


if __name__ == "__main__":
    main()
