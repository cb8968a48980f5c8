"""What sharing ``/mcp`` sessions between gateway replicas costs each request: one read of the
session's record from the NATS KV bucket (the check every request of a session goes through).

    python bench/mcp_sessions.py [--reads N]

Starts NATS (``toolmesh_cli.embedded``), writes one record and reads it ``N`` times in a row with the
gateway's ``McpSessionTable``. Prints ONE JSON line: p50/p95/p99 of a read and this process's CPU
microseconds per read. Targets are not asserted here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

from toolmesh.contracts.mcp_sessions import McpSessionRecord
from toolmesh.platform.bus.nats_bus import NatsBus
from toolmesh.platform.bus.topology import mcp_sessions_bucket
from toolmesh_cli.embedded import EmbeddedNats
from toolmesh_gateway.front_door.session_table import McpSessionTable

WARMUP = 200


async def bench(reads: int) -> dict[str, Any]:
    async with EmbeddedNats(Path(tempfile.mkdtemp(prefix="bench-nats-"))) as server:
        nc = await nats.connect(server.url)
        try:
            table = McpSessionTable(NatsBus(nc), await mcp_sessions_bucket(nc.jetstream(), 1800.0))
            record = McpSessionRecord(
                path="/mcp",
                key_id="bench-key",
                namespace="default",
                protocol_version="2025-11-25",
                client_params={"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}},
                touched_at=time.time(),
            )
            await table.put("bench-session", record)
            for _ in range(WARMUP):
                await table.get("bench-session")
            latencies = []
            cpu = time.process_time()
            for _ in range(reads):
                started = time.perf_counter()
                await table.get("bench-session")
                latencies.append((time.perf_counter() - started) * 1000)
            cpu_us = (time.process_time() - cpu) / reads * 1e6
        finally:
            await nc.close()
    latencies.sort()

    def at(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 3)

    return {
        "bench": "mcp_sessions",
        "reads": reads,
        "p50_ms": at(0.5),
        "p95_ms": at(0.95),
        "p99_ms": at(0.99),
        "cpu_us_per_read": round(cpu_us, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reads", type=int, default=5000)
    print(json.dumps(asyncio.run(bench(parser.parse_args().reads))), flush=True)


if __name__ == "__main__":
    main()
