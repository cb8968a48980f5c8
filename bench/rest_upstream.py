"""REST tool servers: direct ``POST /tools/execute`` vs the same call through toolmesh's REST API.

    python bench/rest_upstream.py [--calls-c1 N] [--calls N] [--concurrency 1,16]

Starts NATS and Postgres (``toolmesh_cli.embedded``), the REST test peer (``tests/peers/rest_server.py``,
starlette + uvicorn, its own process), and every toolmesh role in ONE subprocess (``toolmesh up``);
registers the peer as a ``REST`` server and calls its ``echo`` tool both ways with the cheap
keep-alive HTTP/1.1 client of ``routing.py``. Prints ONE JSON line: latency percentiles and
throughput of each column, the latency toolmesh adds, and CPU microseconds per call of toolmesh
and of the peer (from psutil). Targets are not asserted here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from routing import added_vs, cpu_seconds, note, per_call_us, run_load, toolmesh_up
from routing_targets import ROOT, TOKEN, Call, HttpConnection

from toolmesh.platform import processes
from toolmesh.platform.polling import poll_until
from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port

PEER = ROOT / "tests" / "peers" / "rest_server.py"
ARGUMENTS = {"text": "hello"}


class Column:
    """``n`` keep-alive connections POSTing one body to one path; any status but 200 fails the run."""

    def __init__(self, name: str, port: int, path: str, body: dict[str, Any]) -> None:
        self.name = name
        self._port, self._path = port, path
        self._body = json.dumps(body).encode()
        self._connections: list[HttpConnection] = []

    async def callers(self, n: int) -> list[Call]:
        await self.close()  # fresh connections per run: idle keep-alive connections get closed
        self._connections = [await HttpConnection.open("127.0.0.1", self._port) for _ in range(n)]

        def caller(connection: HttpConnection) -> Call:
            async def call() -> None:
                status, answer = await connection.post(self._path, self._body, TOKEN)
                if status != 200:
                    raise RuntimeError(f"{self.name} call failed: {status} {answer[:300]!r}")

            return call

        return [caller(c) for c in self._connections]

    async def close(self) -> None:
        for connection in self._connections:
            await connection.close()
        self._connections = []


def spawn_peer(port: int) -> subprocess.Popen[bytes]:
    """Start the REST test peer on ``port``."""
    return processes.spawn([sys.executable, str(PEER), "--port", str(port)])


@contextlib.asynccontextmanager
async def rest_peer(port: int) -> AsyncIterator[subprocess.Popen[bytes]]:
    """The REST test peer on ``port``, once it accepts connections; terminated afterwards."""
    process = spawn_peer(port)
    try:

        async def listening() -> bool:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return True

        if not await poll_until(listening, 30, interval=0.1, retry_on=(OSError,)):
            raise RuntimeError(f"the REST peer did not listen on {port}")
        yield process
    finally:
        await processes.stop(process, signal.SIGTERM, 10)


async def wait_routable(port: int, peer_port: int) -> None:
    """Register the peer as ``toolbox`` and wait until its tool answers through toolmesh."""
    deadline = time.monotonic() + 60
    connection = await poll_until(lambda: HttpConnection.open("127.0.0.1", port), 60, interval=0.2, retry_on=(OSError,))
    if connection is None:
        raise RuntimeError(f"toolmesh did not listen on {port}")
    try:
        config = {"url": f"http://127.0.0.1:{peer_port}"}
        body = {"name": "toolbox", "transport_type": "REST", "connection_config": config}
        status, answer = await connection.post("/api/v1/aggregator/servers", json.dumps(body).encode(), TOKEN)
        if status != 201:
            raise RuntimeError(f"registration failed: {status} {answer!r}")
        probe = json.dumps({"name": "toolbox.echo", "arguments": ARGUMENTS}).encode()

        async def routable() -> bool:
            return (await connection.post("/api/v1/tools/call", probe, TOKEN))[0] == 200

        if not await poll_until(routable, deadline - time.monotonic(), interval=0.2):
            raise RuntimeError("the REST peer did not become routable")
    finally:
        await connection.close()


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    levels = [int(c) for c in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="toolmesh-bench-") as tmp:
        work = Path(tmp)
        async with EmbeddedNats(work / "nats") as nats, EmbeddedPostgres(work / "pg") as postgres:
            database_url = await postgres.ensure_database("toolmesh")
            port, peer_port = free_port(), free_port()
            async with rest_peer(peer_port) as peer, toolmesh_up(work, nats.url, database_url, port) as process:
                await wait_routable(port, peer_port)
                note("REST peer registered and routable")
                columns = [
                    Column("direct", peer_port, "/tools/execute", {"tool": "echo", "arguments": ARGUMENTS}),
                    Column("toolmesh", port, "/api/v1/tools/call", {"name": "toolbox.echo", "arguments": ARGUMENTS}),
                ]
                probes = {"toolmesh": lambda: cpu_seconds(process.pid), "peer": lambda: cpu_seconds(peer.pid)}
                results: dict[str, dict[str, Any]] = {c.name: {} for c in columns}
                cpu: dict[str, dict[str, dict[str, float]]] = {c.name: {p: {} for p in probes} for c in columns}
                for column in columns:
                    await run_load(column, 4, args.warmup)
                for level in levels:
                    calls = args.calls_c1 if level == 1 else args.calls
                    for column in columns:
                        before = {name: probe() for name, probe in probes.items()}
                        results[column.name][f"c{level}"] = await run_load(column, level, calls)
                        for name, probe in probes.items():
                            cpu[column.name][name][f"c{level}"] = per_call_us(probe() - before[name], calls)
                        note(f"{column.name} c{level}: {results[column.name][f'c{level}']}")
                for column in columns:
                    await column.close()
    return {
        "bench": "rest_upstream",
        "tool": "echo",
        "upstream": "rest_server.py (starlette + uvicorn) over HTTP/1.1",
        "direct": results["direct"],
        "toolmesh": results["toolmesh"],
        "added": added_vs(results["toolmesh"], results["direct"]),
        "toolmesh_cpu_us_per_call": cpu["toolmesh"]["toolmesh"],
        "peer_cpu_us_per_call": cpu["toolmesh"]["peer"],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls-c1", type=int, default=1000, help="calls at concurrency 1")
    parser.add_argument("--calls", type=int, default=3000, help="calls at each higher concurrency")
    parser.add_argument("--concurrency", default="1,16", help="comma-separated concurrency levels")
    parser.add_argument("--warmup", type=int, default=100)
    print(json.dumps(asyncio.run(bench(parser.parse_args()))), flush=True)


if __name__ == "__main__":
    main()
