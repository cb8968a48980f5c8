"""How ``load.py`` drives calls: an open-loop rate, the projection lag probe, and the three columns
(the upstream directly, through REST and through ``/mcp``), all with one cheap HTTP/1.1 client so
that the differences are toolmesh's, not the clients'."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import nats
from load_system import Http, Pool
from pacing import paced

from toolmesh.platform.store.queries import PROJECTOR

EVENTS_STREAM = "TOOLMESH_EVENTS"
MAX_IN_FLIGHT = 512
CALL_TIMEOUT_SECONDS = 30.0
PROTOCOL = "2025-06-18"
Call = Callable[[], Awaitable[str | None]]
"""One call: None when it succeeded, else what went wrong (``http 503``, ``tool error``...)."""


# -- open-loop load -----------------------------------------------------------------------------


async def open_loop(call: Call, rate: float, seconds: float) -> dict[str, Any]:
    """``rate`` calls per second for ``seconds``; latency from each call's scheduled start."""
    total = max(1, int(rate * seconds))
    latencies: list[float] = []
    errors: Counter[str] = Counter()

    async def one(_: int, scheduled: float) -> None:
        try:
            error = await asyncio.wait_for(call(), CALL_TIMEOUT_SECONDS)
        except Exception as exc:  # a failed or timed-out call counts as an error; the run goes on
            error = type(exc).__name__
        latencies.append(time.perf_counter() - scheduled)
        if error is not None:
            errors[error] += 1

    start = time.perf_counter()
    await paced(one, rate, total, MAX_IN_FLIGHT)
    elapsed = time.perf_counter() - start
    cuts = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else [latencies[0]] * 99
    return {
        "target_rate": rate,
        "achieved_rate": round(total / elapsed, 1),
        "calls": total,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "p50_ms": round(cuts[49] * 1000, 2),
        "p95_ms": round(cuts[94] * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
    }


class LagProbe:
    """Event-to-projection lag: for each new stream sequence seen, the time until the projector's
    checkpoint reaches it (sampled every ``SAMPLE_SECONDS``, so that is the resolution)."""

    SAMPLE_SECONDS = 0.05

    def __init__(self, nats_url: str, database_url: str) -> None:
        self._nats_url, self._database_url = nats_url, database_url
        self._pending: list[tuple[float, int]] = []  # (first seen, stream last seq) not applied yet
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
        newest = (await js.stream_info(EVENTS_STREAM)).state.last_seq
        while not stop.is_set():
            last = (await js.stream_info(EVENTS_STREAM)).state.last_seq
            if last > newest:
                self._pending.append((time.perf_counter(), last))
                newest = last
            applied = await db.fetchval("SELECT last_seq FROM mcp.projector_checkpoint WHERE projector = $1", PROJECTOR)
            now = time.perf_counter()
            self.lags.extend(now - seen for seen, seq in self._pending if seq <= (applied or 0))
            self._pending = [(seen, seq) for seen, seq in self._pending if seq > (applied or 0)]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.SAMPLE_SECONDS)

    def summary(self) -> dict[str, float]:
        """Percentiles of the lags measured since the last summary (and what is still pending)."""
        lags, self.lags = self.lags, []
        unapplied = len(self._pending)
        if not lags:
            return {"events_seen": 0, "unapplied": unapplied}
        ordered = sorted(lags)
        return {
            "events_seen": len(ordered),
            "lag_p50_ms": round(ordered[len(ordered) // 2] * 1000, 1),
            "lag_p95_ms": round(ordered[int(len(ordered) * 0.95)] * 1000, 1),
            "lag_max_ms": round(ordered[-1] * 1000, 1),
            "unapplied": unapplied,
        }


# -- the four columns ---------------------------------------------------------------------------


def rotating(names: list[tuple[int, str, str]]) -> Callable[[], tuple[int, str, str]]:
    """Every (port, server, tool) in turn."""
    cycle = itertools.cycle(names)
    return lambda: next(cycle)


def direct_call(pools: dict[int, Pool], pick: Callable[[], tuple[int, str, str]]) -> Call:
    ids = itertools.count(1)

    async def call() -> str | None:
        port, _, tool = pick()
        params = {"name": tool, "arguments": {"text": "hello"}}
        message = {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": params}
        status, body = await pools[port].request("POST", "/mcp", json.dumps(message).encode())
        return None if status == 200 and b'"isError": false' in body else f"http {status}"

    return call


def rest_call(api: Pool, pick: Callable[[], tuple[int, str, str]]) -> Call:
    async def call() -> str | None:
        _, server, tool = pick()
        body = json.dumps({"name": f"{server}.{tool}", "arguments": {"text": "hello"}}).encode()
        status, answer = await api.request("POST", "/api/v1/tools/call", body)
        return None if status == 200 else f"http {status} {json.loads(answer).get('error_code', '')}"

    return call


async def mcp_session(port: int, path: str) -> dict[str, str]:
    """Initialize an MCP session over Streamable HTTP with the raw client; the headers its calls carry."""
    http = await Http.open(port)
    try:
        params = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "load", "version": "1"}}
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        status, headers, body = await http.exchange("POST", path, json.dumps(init).encode())
        if status != 200 or rpc_reply(body, 0) is None:
            raise RuntimeError(f"initialize on {path}: {status} {body[:300]!r}")
        session = {"Mcp-Protocol-Version": PROTOCOL}
        if "mcp-session-id" in headers:
            session["Mcp-Session-Id"] = headers["mcp-session-id"]
        initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        status, body = await http.request("POST", path, initialized, session)
        if status not in (200, 202):
            raise RuntimeError(f"notifications/initialized on {path}: {status} {body[:300]!r}")
        return session
    finally:
        http.close()


def rpc_reply(body: bytes, ident: int) -> dict[str, Any] | None:
    """The JSON-RPC response with id ``ident`` in a JSON body or an SSE stream, else None."""
    texts = (
        [body]
        if body.lstrip().startswith(b"{")
        else [line[5:] for line in body.splitlines() if line.startswith(b"data:")]
    )
    for text in texts:
        message = json.loads(text)
        if isinstance(message, dict) and message.get("id") == ident:
            return message
    return None


def mcp_call(pool: Pool, path: str, session: dict[str, str], names: list[str]) -> Call:
    """``tools/call`` on toolmesh's ``/mcp`` with the raw client, every tool in turn."""
    ids, cycle = itertools.count(1), itertools.cycle(names)

    async def call() -> str | None:
        ident = next(ids)
        params = {"name": next(cycle), "arguments": {"text": "hello"}}
        message = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}
        status, body = await pool.request("POST", path, json.dumps(message).encode(), session)
        if status != 200:
            return f"http {status}"
        reply = rpc_reply(body, ident)
        if reply is None:
            return "no reply"
        if "error" in reply:
            return f"rpc {reply['error'].get('code')}"
        return "tool error" if reply["result"].get("isError") else None

    return call
