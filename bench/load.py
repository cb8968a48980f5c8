"""Sustained load and memory: 50 HTTP upstreams with 10,000 tools, through REST and ``/mcp``.

    python bench/load.py [--servers 50] [--tools 200] [--rate 100] [--seconds 30]
                         [--step-seconds 10] [--phases memory,sessions,load]

Prints one JSON line per run (stdout; progress on stderr). Three phases, each on its own fresh NATS
and Postgres (``toolmesh_cli.embedded``), with the upstreams of ``load_upstreams.py`` (one child
process serving many Streamable HTTP MCP servers):

1. ``memory``: ``toolmesh up`` (every role in one process) idle, then holding 500 HTTP servers
   with 5 tools each (2,500 tools): its RSS (psutil) once settled.
2. ``sessions``: gateway, projector and ONE session-worker as their own processes; the
   session-worker's RSS before and after 500 idle HTTP upstream sessions (1 tool each), per session.
3. ``load``: every role as its own process (gateway, session-worker, projector, indexer,
   classifier-worker, health-worker), 50 servers x 200 tools. Open-loop calls (latency counted
   from each call's scheduled start, so a stall is not hidden) at ``--rate`` for ``--seconds``,
   then stepping the rate up (``--step-seconds`` each) until errors pass 1%, p95 passes ten times
   its value at ``--rate`` or the achieved rate falls under 90% of the target (each path on its
   own). At each rate, each path runs right after its baseline, ``direct``: the upstream called
   with ``tools/call`` by the same cheap HTTP/1.1 client that calls ``rest`` (``POST
   /api/v1/tools/call``) and ``mcp`` (``tools/call`` on toolmesh's ``/mcp`` in one MCP session), so
   the routing overhead (routed - direct) is toolmesh's, not a client library's.
   Calls rotate over every server and tool. Event-to-projection lag samples, every 0.25 s, how
   long the projector's checkpoint trails the newest event of the stream (the gateway's
   call audit publishes events while calls run). RSS per role after each run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_calls import Call, LagProbe, direct_call, mcp_call, mcp_session, open_loop, rest_call, rotating
from load_system import Deployment, Pool, deployment, register_all, rss_mb, settled_rss, upstreams

ROLES = ("gateway", "session-worker", "projector", "indexer", "classifier-worker", "health-worker")


def note(message: str) -> None:
    """Progress on stderr (stdout carries the JSON lines)."""
    print(f"[load] {message}", file=sys.stderr, flush=True)


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


# -- phases -------------------------------------------------------------------------------------


async def memory_phase(work: Path) -> None:
    """``toolmesh up``: idle RSS, then with 500 HTTP servers and 2,500 tools."""
    note("memory: toolmesh up, idle")
    async with deployment(work, ["up"], {}) as deploy:
        api = Pool(deploy.port)
        idle = await settled_rss(deploy.pids["up"])
        with upstreams(500, 5) as (ports, _):
            note("memory: registering 500 HTTP servers x 5 tools")
            took = await register_all(api, ports, 5, classified=True)
            loaded = await settled_rss(deploy.pids["up"])
        api.close()
    emit(
        {
            "bench": "load",
            "run": "memory_up",
            "idle_rss_mb": idle,
            "servers": 500,
            "tools": 2500,
            "loaded_rss_mb": loaded,
            "register_and_connect_s": took,
            "targets_mb": {"idle": 250, "loaded": 500},
        }
    )


async def sessions_phase(work: Path) -> None:
    """One session-worker's RSS per idle HTTP upstream session (500 sessions, 1 tool each)."""
    note("sessions: gateway, projector, one session-worker")
    async with deployment(work, ["gateway", "projector", "session-worker"], {}) as deploy:
        api = Pool(deploy.port)
        worker = deploy.pids["session-worker"]
        before = await settled_rss(worker)
        with upstreams(500, 1) as (ports, _):
            took = await register_all(api, ports, 1, classified=False)
            after = await settled_rss(worker)
        api.close()
    emit(
        {
            "bench": "load",
            "run": "memory_sessions",
            "sessions": 500,
            "session_worker_rss_before_mb": before,
            "session_worker_rss_after_mb": after,
            "per_session_kb": round((after - before) * 1024 / 500, 1),
            "register_and_connect_s": took,
            "target_kb": 200,
        }
    )


async def load_phase(work: Path, args: argparse.Namespace) -> None:
    """Every role in its own process; 50 x 200 tools; 100 req/s, then step up."""
    roles = [*ROLES, *(["session-worker"] * (args.session_workers - 1))]
    async with deployment(work, roles, {}) as deploy:
        api = Pool(deploy.port)
        idle = deploy.rss()
        with upstreams(args.servers, args.tools) as (ports, upstream_pid):
            note(f"load: registering {args.servers} servers x {args.tools} tools")
            took = await register_all(api, ports, args.tools, classified=True)
            note(f"load: connected and classified in {took} s")
            names = [(port, f"load{i:03d}", f"tool_{t:04d}") for t in range(args.tools) for i, port in enumerate(ports)]
            pools = {port: Pool(port) for port in ports}
            mcp_path = "/mcp?mode=all"
            # /mcp answers tools/list in one SSE event (over the SDK client's 1 MB limit at 10,000
            # tools), so the names are built the way the front door builds them (server__tool).
            mcp_names = [f"{server}__{tool}" for _, server, tool in names]
            session = await mcp_session(deploy.port, mcp_path)
            columns: dict[str, Call] = {
                "direct": direct_call(pools, rotating(names)),
                "rest": rest_call(api, rotating(names)),
                "mcp": mcp_call(Pool(deploy.port), mcp_path, session, mcp_names),
            }
            for name, call in columns.items():  # warm up every path
                await open_loop(call, 50, 2)
                note(f"load: warmed up {name}")
            probe = LagProbe(deploy.nats_url, deploy.database_url)
            context = {"servers": args.servers, "tools": args.servers * args.tools}
            pairs = {"rest": (columns["rest"], columns["direct"]), "mcp": (columns["mcp"], columns["direct"])}
            base_p95: dict[str, float] = {}
            rate, seconds = float(args.rate), args.seconds
            while pairs and rate <= args.max_rate:
                for routed, (call, direct) in list(pairs.items()):
                    line = await measure(routed, call, direct, rate, seconds, probe, deploy)
                    rss = {**deploy.rss(), "upstreams": rss_mb(upstream_pid)}
                    emit({"bench": "load", **context, **line, "rss_mb": rss})
                    base_p95.setdefault(routed, line["p95_ms"])
                    if (
                        line["errors"] > 0.01 * line["calls"]
                        or line["p95_ms"] > 10 * base_p95[routed]
                        or line["achieved_rate"] < 0.9 * rate
                    ):
                        del pairs[routed]  # this path saturated: the previous step was its highest
                rate, seconds = rate * 2 if rate >= 200 else rate + 100, args.step_seconds
            for pool in pools.values():
                pool.close()
        api.close()
        emit({"bench": "load", "run": "rss_per_role", "idle_mb": idle, "register_and_classify_s": took})


async def measure(
    routed: str, call: Call, direct: Call, rate: float, seconds: float, probe: LagProbe, deploy: Deployment
) -> dict[str, Any]:
    """The direct column, then the routed one, at one rate: the routed run's line with the overhead
    and the CPU each toolmesh process spent per routed call."""
    baseline = await open_loop(direct, rate, seconds)
    cpu_before = deploy.cpu_seconds()
    async with probe.running():
        result = await open_loop(call, rate, seconds)
    cpu = {
        label: round((used - cpu_before[label]) / result["calls"] * 1000, 2)
        for label, used in deploy.cpu_seconds().items()
    }
    return {
        "run": f"{routed}@{rate:g}",
        "through": routed,
        "seconds": seconds,
        **result,
        "direct": {k: baseline[k] for k in ("achieved_rate", "p50_ms", "p95_ms", "p99_ms", "errors")},
        "routing_overhead": {k: round(result[k] - baseline[k], 2) for k in ("p50_ms", "p95_ms", "p99_ms")},
        "event_to_projection": probe.summary(),
        "cpu_ms_per_call": cpu,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


async def main(args: argparse.Namespace) -> None:
    phases = args.phases.split(",")
    with tempfile.TemporaryDirectory(prefix="toolmesh-load-") as tmp:
        for phase in phases:
            work = Path(tmp) / phase
            work.mkdir()
            if phase == "memory":
                await memory_phase(work)
            elif phase == "sessions":
                await sessions_phase(work)
            elif phase == "load":
                await load_phase(work, args)
            else:
                raise SystemExit(f"unknown phase {phase!r}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--servers", type=int, default=50)
    parser.add_argument("--tools", type=int, default=200, help="tools per server")
    parser.add_argument("--rate", type=float, default=100, help="the sustained rate, calls/s")
    parser.add_argument("--seconds", type=float, default=30, help="duration at --rate")
    parser.add_argument("--step-seconds", type=float, default=10, help="duration of each higher step")
    parser.add_argument("--max-rate", type=float, default=3200)
    parser.add_argument("--session-workers", type=int, default=1)
    parser.add_argument("--phases", default="memory,sessions,load")
    asyncio.run(main(parser.parse_args()))
