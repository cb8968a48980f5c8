"""What durable quotas cost a tool call: ``POST /api/v1/tools/call`` with no quota, with three quotas
that apply (key, namespace, server; one window each: three JetStream counters), and with the same three
quotas limiting every window (nine counters).

    python bench/quota_overhead.py [--calls N]

Starts NATS and Postgres, ``toolmesh up`` in one subprocess and one loopback HTTP MCP server
(``load_upstreams.py``); drives sequential calls from this process with a cheap keep-alive HTTP/1.1
client. Prints ONE JSON line: latency percentiles per phase, CPU microseconds per call of the toolmesh
process and of nats-server, and the difference each phase makes over no quota.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from load_system import Deployment, Pool, deployment, register_all, upstreams

LIMIT = 1_000_000_000
"""A limit no phase reaches: the phases measure counting, not refusals."""


def note(message: str) -> None:
    """Progress on stderr (stdout carries the one JSON line)."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def cpu(pid: int) -> float:
    return float(sum(psutil.Process(pid).cpu_times()[:2]))


async def phase(api: Pool, deploy: Deployment, calls: int) -> dict[str, Any]:
    """``calls`` sequential tool calls (after a warm-up): latency and CPU per call."""
    body = json.dumps({"name": "load000.tool_0000", "arguments": {"text": "hi"}}).encode()
    for _ in range(50):
        await api.request("POST", "/api/v1/tools/call", body)
    pids = {"toolmesh": deploy.pids["up"], "nats": deploy.backend_pids["nats"]}
    before = {label: cpu(pid) for label, pid in pids.items()}
    latencies = []
    for _ in range(calls):
        started = time.perf_counter()
        status, answer = await api.request("POST", "/api/v1/tools/call", body)
        latencies.append((time.perf_counter() - started) * 1000)
        if status != 200:
            raise RuntimeError(f"call failed: {status} {answer[:300]!r}")
    used = {label: cpu(pid) - before[label] for label, pid in pids.items()}
    latencies.sort()
    return {
        "p50_ms": round(statistics.median(latencies), 3),
        "p95_ms": round(latencies[int(len(latencies) * 0.95)], 3),
        "cpu_us_per_call": {label: round(seconds / calls * 1e6, 1) for label, seconds in used.items()},
    }


async def set_quotas(api: Pool, key_name: str, windows: tuple[str, ...]) -> None:
    """Key, namespace and server quotas limiting ``windows``, created or replaced."""
    status, listed = await api.request("GET", "/api/v1/quotas")
    for quota in json.loads(listed)["quotas"]:
        await api.request("DELETE", f"/api/v1/quotas/{quota['id']}")
    for scope, target in (("key", key_name), ("namespace", None), ("server", "load000")):
        body: dict[str, Any] = {"scope": scope, "target": target, **{f"per_{w}": LIMIT for w in windows}}
        status, answer = await api.request("POST", "/api/v1/quotas", json.dumps(body).encode())
        if status != 201:
            raise RuntimeError(f"quota not set: {status} {answer[:300]!r}")


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, upstreams(1, 1) as (ports, _):
        async with deployment(Path(tmp), ["up"], {}) as deploy:
            api = Pool(deploy.port)
            await register_all(api, ports, 1, classified=False)
            me = json.loads((await api.request("GET", "/api/v1/auth/me"))[1])
            results = {}
            note("no quota")
            results["none"] = await phase(api, deploy, calls)
            note("3 quotas, one window each (3 counters)")
            await set_quotas(api, me["name"], ("day",))
            results["three_quotas"] = await phase(api, deploy, calls)
            note("3 quotas, every window (9 counters)")
            await set_quotas(api, me["name"], ("minute", "day", "month"))
            results["three_quotas_all_windows"] = await phase(api, deploy, calls)
            api.close()
    base = results["none"]
    for name in ("three_quotas", "three_quotas_all_windows"):
        results[name]["added_p50_ms"] = round(results[name]["p50_ms"] - base["p50_ms"], 3)
        results[name]["added_cpu_us_per_call"] = {
            label: round(value - base["cpu_us_per_call"][label], 1)
            for label, value in results[name]["cpu_us_per_call"].items()
        }
    print(json.dumps({"bench": "quota_overhead", "calls_per_phase": calls, **results}), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    asyncio.run(main(parser.parse_args().calls))
