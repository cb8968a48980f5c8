"""Sustained load and memory: 50 HTTP upstreams with 10,000 tools, through REST and ``/mcp``.

    python bench/load.py [--servers 50] [--tools 200] [--rate 100] [--seconds 30]
                         [--step-seconds 10] [--phases memory,sessions,load]

Prints one JSON line per run (stdout; progress on stderr). Three phases, each on its own fresh NATS
and Postgres (``toolmesh.embedded``), with the upstreams of ``load_upstreams.py`` (one child
process serving many Streamable HTTP MCP servers):

1. ``memory``: ``toolmesh up`` (every role in one process) idle, then holding 500 HTTP servers
   with 5 tools each (2,500 tools): its RSS (psutil) once settled.
2. ``sessions``: gateway, projector and ONE session-worker as their own processes; the
   session-worker's RSS before and after 500 idle HTTP upstream sessions (1 tool each), per session.
3. ``load``: every role as its own process (gateway, session-worker, projector, indexer,
   classifier-worker, health-worker), 50 servers x 200 tools. Open-loop calls (latency counted
   from each call's scheduled start, so a stall is not hidden) at ``--rate`` for ``--seconds``,
   then stepping the rate up (``--step-seconds`` each) until errors pass 1%, p95 passes ten times
   its value at ``--rate`` or the achieved rate falls under 90% of the target. Each step runs four
   columns: ``direct`` (the same raw HTTP/1.1 client POSTing ``tools/call`` to the upstream),
   ``rest`` (``POST /api/v1/tools/call`` through toolmesh), ``direct_sdk`` (the ``mcp`` SDK client
   on the upstream) and ``mcp`` (the same SDK client on toolmesh's ``/mcp``); routing overhead is
   rest - direct and mcp - direct_sdk at the same rate. Event-to-projection lag samples, every
   0.25 s, how long the projector's checkpoint trails the newest event of the stream (the gateway's
   call audit publishes events while calls run). RSS per role after each run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx2
import nats
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from toolmesh.embedded import EmbeddedNats, EmbeddedPostgres, free_port
from toolmesh.store.projection import PROJECTOR

BENCH = Path(__file__).resolve().parent
TOKEN = "bench-" + secrets.token_hex(8)
EVENTS_STREAM = "TOOLMESH_EVENTS"
ROLES = ("gateway", "session-worker", "projector", "indexer", "classifier-worker", "health-worker")
MAX_IN_FLIGHT = 512
Call = Callable[[], Awaitable[bool]]


def note(message: str) -> None:
    """Progress on stderr (stdout carries the JSON lines)."""
    print(f"[load] {message}", file=sys.stderr, flush=True)


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def rss_mb(pid: int) -> float:
    """Resident set size of one process, in MB."""
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


# -- a cheap keep-alive HTTP/1.1 client ---------------------------------------------------------


class Http:
    """One keep-alive connection: requests with a JSON body, ``Content-Length`` answers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self._reader, self._writer, self._host = reader, writer, host

    @classmethod
    async def open(cls, port: int) -> Http:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, f"127.0.0.1:{port}")

    async def request(self, method: str, path: str, body: bytes = b"", token: str = TOKEN) -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}\r\nAuthorization: Bearer {token}\r\n"
            f"Accept: application/json, text/event-stream\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        self._writer.write(head + body)
        status_line = await self._reader.readline()
        if not status_line:
            raise ConnectionError("connection closed")
        length = 0
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return int(status_line.split(b" ", 2)[1]), await self._reader.readexactly(length)

    def close(self) -> None:
        self._writer.close()


class Pool:
    """Keep-alive connections to one port, opened as concurrency needs them."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._idle: list[Http] = []

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        connection = self._idle.pop() if self._idle else await Http.open(self.port)
        try:
            answer = await connection.request(method, path, body)
        except BaseException:
            connection.close()
            raise
        self._idle.append(connection)
        return answer

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()


# -- processes ----------------------------------------------------------------------------------


@contextlib.contextmanager
def upstreams(servers: int, tools: int) -> Any:
    """``load_upstreams.py`` as a child process; yields its ports."""
    process = subprocess.Popen(
        [sys.executable, str(BENCH / "load_upstreams.py"), "--servers", str(servers), "--tools", str(tools)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        ports: list[int] = json.loads(process.stdout.readline())["ports"]
        yield ports, process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Deployment:
    """toolmesh processes on fresh backends: ``pids`` by label, the gateway's ``port``."""

    port: int
    nats_url: str
    database_url: str
    env: dict[str, str] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    backend_pids: dict[str, int] = field(default_factory=dict)

    def rss(self) -> dict[str, float]:
        return {label: rss_mb(pid) for label, pid in self.pids.items()}


def spawn(command: str, work: Path, label: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``toolmesh <command>`` with its own data dir (an embedded index belongs to one process)."""
    data = work / f"data-{label}"
    with (work / f"{label}.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "toolmesh_cli.main", command, "--data-dir", str(data)]
            if command == "up"
            else [sys.executable, "-m", "toolmesh_cli.main", command],
            env={**env, "TOOLMESH_DATA_DIR": str(data)},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )


@contextlib.asynccontextmanager
async def deployment(work: Path, commands: list[str], extra_env: dict[str, str]) -> AsyncIterator[Deployment]:
    """Fresh NATS and Postgres, then one process per command (``up`` or a role name)."""
    async with EmbeddedNats(work / "nats") as nats_server, EmbeddedPostgres(work / "pg") as postgres:
        database_url = await postgres.ensure_database("toolmesh")
        deploy = Deployment(free_port(), nats_server.url, database_url)
        deploy.backend_pids = {"nats": nats_server.pid or 0, "postgres": postgres.pid or 0}
        deploy.env = base_env = {
            **os.environ,
            "TOOLMESH_NATS_URL": nats_server.url,
            "TOOLMESH_DATABASE_URL": database_url,
            "TOOLMESH_ADMIN_TOKEN": TOKEN,
            "TOOLMESH_PORT": str(deploy.port),
            "TOOLMESH_LOG_LEVEL": "WARNING",
            "MCP_CREDENTIAL_KEY": secrets.token_urlsafe(32),
            "TOOLMESH_RATE_LIMIT_PER_SECOND": "0",  # measure routing, not the per-principal limit
            "MCP_AGGREGATOR_MAX_SERVERS": "1000",
            **extra_env,
        }
        processes: list[subprocess.Popen[bytes]] = []
        try:
            counts: dict[str, int] = {}
            for command in commands:
                counts[command] = counts.get(command, 0) + 1
                label = command if counts[command] == 1 else f"{command}-{counts[command]}"
                process = spawn(command, work, label, base_env)
                processes.append(process)
                deploy.pids[label] = process.pid
            await wait_ready(deploy.port, processes)
            yield deploy
        finally:
            for process in processes:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    await asyncio.to_thread(process.wait, 30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


async def poll(check: Callable[[], Awaitable[bool]], timeout: float, what: str, every: float = 0.5) -> None:
    """Until ``check()`` is true; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(every)


async def wait_ready(port: int, processes: list[subprocess.Popen[bytes]]) -> None:
    async def ready() -> bool:
        if any(p.poll() is not None for p in processes):
            raise RuntimeError("a toolmesh process exited during start-up (see its log)")
        try:
            http = await Http.open(port)
        except OSError:
            return False
        try:
            return (await http.request("GET", "/readyz"))[0] == 200
        finally:
            http.close()

    await poll(ready, 120, "/readyz")


async def settled_rss(pid: int, timeout: float = 60) -> float:
    """RSS once it stops moving (three 1-second samples within 1 MB)."""
    samples: list[float] = []

    async def steady() -> bool:
        samples.append(rss_mb(pid))
        return len(samples) >= 3 and max(samples[-3:]) - min(samples[-3:]) < 1.0

    with contextlib.suppress(RuntimeError):  # still moving after the timeout: take the last sample
        await poll(steady, timeout, "a settled RSS", every=1.0)
    return samples[-1]


async def state(api: Pool) -> dict[str, Any]:
    status, body = await api.request("GET", "/api/v1/aggregator/state")
    if status != 200:
        raise RuntimeError(f"state: {status} {body[:200]!r}")
    loaded: dict[str, Any] = json.loads(body)
    return loaded


async def register_all(api: Pool, ports: list[int], tools_each: int, *, classified: bool) -> float:
    """Register one HTTP server per port and wait until every one is connected with its tools; seconds."""
    started = time.perf_counter()
    for index, port in enumerate(ports):
        body = json.dumps(
            {
                "name": f"load{index:03d}",
                "transport_type": "HTTP",
                "connection_config": {"base_url": f"http://127.0.0.1:{port}/mcp"},
            }
        ).encode()
        status, answer = await api.request("POST", "/api/v1/aggregator/servers", body)
        if status != 201:
            raise RuntimeError(f"registration failed: {status} {answer[:300]!r}")

    async def connected() -> bool:
        now = await state(api)
        done = now["connected_servers"] == len(ports) and now["total_tools"] == len(ports) * tools_each
        return done and (not classified or now["unclassified_tools"] == 0)

    await poll(connected, 600, "every server connected")
    return round(time.perf_counter() - started, 1)


# -- open-loop load -----------------------------------------------------------------------------


async def open_loop(call: Call, rate: float, seconds: float) -> dict[str, Any]:
    """``rate`` calls per second for ``seconds``; latency from each call's scheduled start."""
    total = max(1, int(rate * seconds))
    latencies: list[float] = []
    errors = 0
    slots = asyncio.Semaphore(MAX_IN_FLIGHT)
    tasks: set[asyncio.Task[None]] = set()

    async def one(scheduled: float) -> None:
        nonlocal errors
        try:
            ok = await call()
        except Exception:
            ok = False
        finally:
            slots.release()
        latencies.append(time.perf_counter() - scheduled)
        errors += not ok

    start = time.perf_counter()
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await slots.acquire()
        task = asyncio.create_task(one(scheduled))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    cuts = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else [latencies[0]] * 99
    return {
        "target_rate": rate,
        "achieved_rate": round(total / elapsed, 1),
        "calls": total,
        "errors": errors,
        "p50_ms": round(cuts[49] * 1000, 2),
        "p95_ms": round(cuts[94] * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
    }


class LagProbe:
    """Samples how far the projector's checkpoint trails the event stream, in seconds."""

    def __init__(self, nats_url: str, database_url: str) -> None:
        self._nats_url, self._database_url = nats_url, database_url
        self._seen: list[tuple[float, int]] = []  # (time, stream last seq) as first seen
        self.lags: list[float] = []

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[LagProbe]:
        nc = await nats.connect(self._nats_url)
        db = await asyncpg.connect(self._database_url)
        stop = asyncio.Event()
        task = asyncio.create_task(self._sample(nc.jetstream(), db, stop))
        try:
            yield self
        finally:
            stop.set()
            await task
            await db.close()
            await nc.close()

    async def _sample(self, js: Any, db: asyncpg.Connection, stop: asyncio.Event) -> None:
        while not stop.is_set():
            now = time.perf_counter()
            last = (await js.stream_info(EVENTS_STREAM)).state.last_seq
            if not self._seen or last > self._seen[-1][1]:
                self._seen.append((now, last))
            applied = await db.fetchval("SELECT last_seq FROM mcp.projector_checkpoint WHERE projector = $1", PROJECTOR)
            pending = [t for t, seq in self._seen if seq > (applied or 0)]
            self.lags.append(now - pending[0] if pending else 0.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)

    def summary(self) -> dict[str, float]:
        lags, self.lags = self.lags, []
        if not lags:
            return {}
        ordered = sorted(lags)
        return {
            "lag_p50_ms": round(ordered[len(ordered) // 2] * 1000, 1),
            "lag_p95_ms": round(ordered[int(len(ordered) * 0.95)] * 1000, 1),
            "lag_max_ms": round(ordered[-1] * 1000, 1),
        }


# -- the four columns ---------------------------------------------------------------------------


def rotating(names: list[tuple[int, str, str]]) -> Callable[[], tuple[int, str, str]]:
    """Every (port, server, tool) in turn."""
    cycle = itertools.cycle(names)
    return lambda: next(cycle)


def direct_call(pools: dict[int, Pool], pick: Callable[[], tuple[int, str, str]]) -> Call:
    ids = itertools.count(1)

    async def call() -> bool:
        port, _, tool = pick()
        message = {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": {"name": tool}}
        message["params"]["arguments"] = {"text": "hello"}
        status, body = await pools[port].request("POST", "/mcp", json.dumps(message).encode())
        return status == 200 and b'"isError": false' in body

    return call


def rest_call(api: Pool, pick: Callable[[], tuple[int, str, str]]) -> Call:
    async def call() -> bool:
        _, server, tool = pick()
        body = json.dumps({"name": f"{server}.{tool}", "arguments": {"text": "hello"}}).encode()
        status, _ = await api.request("POST", "/api/v1/tools/call", body)
        return status == 200

    return call


@contextlib.asynccontextmanager
async def sdk_session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    """An initialized SDK session over Streamable HTTP with a pool big enough for the load."""
    limits = httpx2.Limits(max_connections=MAX_IN_FLIGHT, max_keepalive_connections=MAX_IN_FLIGHT)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120), limits=limits) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def sdk_call(session: ClientSession, names: list[str]) -> Call:
    cycle = itertools.cycle(names)

    async def call() -> bool:
        result = await session.call_tool(next(cycle), {"text": "hello"})
        return not result.is_error

    return call


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
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                sdk_session(f"http://127.0.0.1:{deploy.port}/mcp?mode=all", headers) as front,
                sdk_session(f"http://127.0.0.1:{ports[0]}/mcp", {}) as upstream,
            ):
                # /mcp answers tools/list in one SSE event, over the SDK client's 1 MB limit at 10,000
                # tools, so the names are built the way the front door builds them (server__tool).
                mcp_names = [f"{server}__{tool}" for _, server, tool in names]
                direct_names = [f"tool_{t:04d}" for t in range(args.tools)]
                columns: dict[str, Call] = {
                    "direct": direct_call(pools, rotating(names)),
                    "rest": rest_call(api, rotating(names)),
                    "direct_sdk": sdk_call(upstream, direct_names),
                    "mcp": sdk_call(front, mcp_names),
                }
                for name, call in columns.items():  # warm up every path
                    await open_loop(call, 50, 2)
                    note(f"load: warmed up {name}")
                probe = LagProbe(deploy.nats_url, deploy.database_url)
                base_p95: dict[str, float] = {}
                rate, seconds, stopped = float(args.rate), args.seconds, {"rest": False, "mcp": False}
                while not all(stopped.values()):
                    step: dict[str, dict[str, Any]] = {}
                    for name, call in columns.items():
                        routed = {"rest": "rest", "mcp": "mcp", "direct": "rest", "direct_sdk": "mcp"}[name]
                        if stopped[routed]:
                            continue
                        async with probe.running():
                            result = await open_loop(call, rate, seconds)
                        step[name] = {**result, **probe.summary()}
                    for routed, direct in (("rest", "direct"), ("mcp", "direct_sdk")):
                        if routed not in step:
                            continue
                        result = step[routed]
                        overhead = {
                            "p50_ms": round(result["p50_ms"] - step[direct]["p50_ms"], 2),
                            "p95_ms": round(result["p95_ms"] - step[direct]["p95_ms"], 2),
                        }
                        base_p95.setdefault(routed, result["p95_ms"])
                        emit(
                            {
                                "bench": "load",
                                "run": f"{routed}@{rate:g}",
                                "through": routed,
                                "servers": args.servers,
                                "tools": args.servers * args.tools,
                                "seconds": seconds,
                                **{k: v for k, v in result.items() if not k.startswith("lag")},
                                "direct": {k: step[direct][k] for k in ("p50_ms", "p95_ms", "p99_ms", "errors")},
                                "routing_overhead": overhead,
                                "event_to_projection": {k: v for k, v in result.items() if k.startswith("lag")},
                                "rss_mb": {**deploy.rss(), "upstreams": rss_mb(upstream_pid)},
                                "load_average": [round(x, 2) for x in os.getloadavg()],
                            }
                        )
                        if (
                            result["errors"] > 0.01 * result["calls"]
                            or result["p95_ms"] > 10 * base_p95[routed]
                            or result["achieved_rate"] < 0.9 * rate
                        ):
                            stopped[routed] = True
                    rate, seconds = rate * 2 if rate >= 200 else rate + 100, args.step_seconds
                    if rate > args.max_rate:
                        break
            for pool in pools.values():
                pool.close()
        api.close()
        emit({"bench": "load", "run": "rss_per_role", "idle_mb": idle, "register_and_classify_s": took})


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
