"""Per-user upstream OAuth: a principal's first call (it opens its own upstream session) vs its
following calls, a call whose access token expired (refreshed on the 401) vs a normal one, and the
memory of idle per-user upstream sessions, before and after they close idle.

    python bench/per_user_oauth.py [--principals N] [--following N] [--sessions 50,100] [--idle-seconds S]

Starts NATS and Postgres (``toolmesh_cli.embedded``), the OAuth-protected peer
(``tests/peers/oauth_server.py``, its own process) and every toolmesh role in ONE subprocess
(``toolmesh up``, ``TOOLMESH_UPSTREAM_USER_SESSION_IDLE_SECONDS`` = ``--idle-seconds``). Registers the
peer once with ``auth: {mode: oauth, identity: per_user}``; each principal is a key of role user the
owner creates, authorized as the tests do (``POST .../authorize``, the authorization URL followed
headlessly to its 302, ``GET /oauth/callback`` on the gateway). Calls are ``POST /api/v1/tools/call``
of ``saas.whoami`` with a keep-alive HTTP/1.1 client, one at a time; each answer must name the
principal's upstream user. Memory comes first, after a warm-up principal: the toolmesh process's
RSS (psutil) once it stops moving, before and after authorizing ``max(--sessions)`` principals, after
each size's first calls, after every session closed idle, and after the same principals opened
theirs again; the opened / closed user sessions are read from ``/metrics``. Once those sessions
closed, ``--principals`` new principals each make a first call and ``--following`` more, then each
makes one call after ``POST /control/expire`` at the peer and one after it. Prints ONE JSON line;
targets are not asserted here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
from routing import note, spawn_toolmesh
from routing_targets import ROOT, TOKEN, HttpConnection

from toolmesh.platform import processes
from toolmesh.platform.polling import poll_until
from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port

PEER = ROOT / "tests" / "peers" / "oauth_server.py"
SERVERS = "/api/v1/aggregator/servers"
CALL = "/api/v1/tools/call"
WHOAMI = json.dumps({"name": "saas.whoami", "arguments": {}}).encode()
USERS = ("alice", "bob")  # the users the peer's authorization server knows
SESSIONS_METRIC = re.compile(r'^mcp_aggregator_user_sessions_total\{[^}]*event="(\w+)"[^}]*\} ([0-9.e+]+)$', re.M)


@dataclass
class Principal:
    token: str
    user: str


def summary(milliseconds: list[float]) -> dict[str, float]:
    """Count, median, p95 and max of latencies in ms."""
    cuts = statistics.quantiles(milliseconds, n=20, method="inclusive")
    return {
        "n": len(milliseconds),
        "p50_ms": round(statistics.median(milliseconds), 2),
        "p95_ms": round(cuts[18], 2),
        "max_ms": round(max(milliseconds), 2),
    }


async def settled_rss_kib(pid: int, timeout: float = 30) -> int:
    """RSS of ``pid`` in KiB once three samples a second apart are within 256 KiB."""
    samples: list[int] = []

    def steady() -> bool:
        samples.append(psutil.Process(pid).memory_info().rss // 1024)
        return len(samples) >= 3 and max(samples[-3:]) - min(samples[-3:]) < 256

    await poll_until(steady, timeout, interval=1.0)  # still moving after the timeout: the last sample
    return samples[-1]


class Deployment:
    """toolmesh's API as the owner and as principals, and the peer's control endpoints."""

    def __init__(self, port: int, peer_origin: str) -> None:
        self.port, self.peer = port, peer_origin
        self.api = httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        )
        self.browser = httpx.AsyncClient(timeout=30)  # follows nothing by itself: the 302 is read
        self.server_id = ""

    async def close(self) -> None:
        await self.api.aclose()
        await self.browser.aclose()

    async def register(self) -> None:
        config = {"base_url": f"{self.peer}/mcp", "auth": {"mode": "oauth", "identity": "per_user"}}
        body = {"name": "saas", "transport_type": "HTTP", "connection_config": config}
        created = await self.api.post(SERVERS, json=body)
        if created.status_code != 201:
            raise RuntimeError(f"registration failed: {created.status_code} {created.text[:300]}")
        self.server_id = created.json()["id"]

    async def principal(self, index: int) -> Principal:
        """A new key of role user, authorized at the peer as alice or bob."""
        key = await self.api.post("/api/v1/auth/keys", json={"name": f"user{index:04d}", "role": "user"})
        if key.status_code != 201:
            raise RuntimeError(f"key creation failed: {key.status_code} {key.text[:300]}")
        principal = Principal(key.json()["token"], USERS[index % len(USERS)])
        await self.peer_control("login", {"user": principal.user})
        headers = {"Authorization": f"Bearer {principal.token}"}
        started = await self.api.post(f"{SERVERS}/{self.server_id}/authorize", headers=headers)
        if started.status_code != 200:
            raise RuntimeError(f"authorize failed: {started.status_code} {started.text[:300]}")
        answer = await self.browser.get(started.json()["authorization_url"])
        if answer.status_code != 302:
            raise RuntimeError(f"the authorization server answered {answer.status_code}")
        back = httpx.URL(answer.headers["location"])
        callback = await self.api.get(back.path, params=back.params, headers=headers)
        if callback.status_code != 200:
            raise RuntimeError(f"callback failed: {callback.status_code} {callback.text[:300]}")
        return principal

    async def peer_control(self, action: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = (await self.browser.post(f"{self.peer}/control/{action}", json=body)).json()
        return result

    async def refresh_grants(self) -> int:
        return int((await self.browser.get(f"{self.peer}/control/stats")).json()["refresh_grants"])

    async def user_sessions(self) -> dict[str, float]:
        """``mcp_aggregator_user_sessions_total`` by event (opened, closed)."""
        text = (await self.api.get("/metrics")).text
        return {event: float(value) for event, value in SESSIONS_METRIC.findall(text)}

    async def wait_connected(self) -> None:
        async def connected() -> bool:
            detail = (await self.api.get(f"{SERVERS}/{self.server_id}")).json()
            return bool(detail["status"] == "CONNECTED" and detail["tool_count"] > 0)

        if not await poll_until(connected, 60, interval=0.2):
            raise RuntimeError("the per-user server did not connect")

    async def wait_all_closed(self, timeout: float) -> float:
        """Until every user session opened so far has closed idle; seconds waited."""
        started = time.monotonic()

        async def all_closed() -> bool:
            now = await self.user_sessions()
            return now.get("closed", 0) >= now.get("opened", 0)

        if not await poll_until(all_closed, timeout, interval=1.0):
            raise RuntimeError("user sessions did not close idle")
        return round(time.monotonic() - started, 1)


class Caller:
    """One keep-alive connection calling ``saas.whoami`` as any principal; timings in ms."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._connection: HttpConnection | None = None

    async def fresh(self) -> None:
        """A new connection (the gateway closes keep-alive connections idle for 5 s)."""
        await self.close()
        self._connection = await HttpConnection.open("127.0.0.1", self._port)

    async def call(self, principal: Principal) -> float:
        assert self._connection is not None
        started = time.perf_counter()
        status, body = await self._connection.post(CALL, WHOAMI, principal.token)
        elapsed = (time.perf_counter() - started) * 1000
        if status != 200 or json.loads(body)["content"][0]["text"] != principal.user:
            raise RuntimeError(f"call failed: {status} {body[:300]!r}")
        return elapsed

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None


async def first_vs_following(deploy: Deployment, caller: Caller, count: int, following: int) -> dict[str, Any]:
    principals = [await deploy.principal(i) for i in range(1, count + 1)]
    before = await deploy.user_sessions()
    first: list[float] = []
    rest: list[float] = []
    for principal in principals:
        await caller.fresh()
        first.append(await caller.call(principal))
        rest += [await caller.call(principal) for _ in range(following)]
    opened = (await deploy.user_sessions()).get("opened", 0) - before.get("opened", 0)
    if opened != count:
        raise RuntimeError(f"{count} first calls opened {opened} user sessions")
    return {
        "first": summary(first),
        "following": summary(rest),
        "added_p50_ms": round(statistics.median(first) - statistics.median(rest), 2),
        "principals": principals,
    }


async def refresh_vs_normal(deploy: Deployment, caller: Caller, principals: list[Principal]) -> dict[str, Any]:
    """For each principal: expire every access token, call (refreshed on the 401), call again."""
    grants = await deploy.refresh_grants()
    refreshed: list[float] = []
    normal: list[float] = []
    for principal in principals:
        await deploy.peer_control("expire")
        await caller.fresh()
        refreshed.append(await caller.call(principal))
        normal.append(await caller.call(principal))
    if (await deploy.refresh_grants()) - grants != len(principals):
        raise RuntimeError("not every call after an expiry refreshed the grant once")
    return {
        "refreshed": summary(refreshed),
        "normal": summary(normal),
        "added_p50_ms": round(statistics.median(refreshed) - statistics.median(normal), 2),
    }


async def open_sessions(deploy: Deployment, caller: Caller, principals: list[Principal]) -> None:
    """One call each (each opens its principal's session); fails if a session closed meanwhile."""
    closed = (await deploy.user_sessions()).get("closed", 0)
    await caller.fresh()
    for principal in principals:
        await caller.call(principal)
    if (await deploy.user_sessions()).get("closed", 0) != closed:
        raise RuntimeError("user sessions closed idle before the measurement: raise --idle-seconds")


async def memory(deploy: Deployment, caller: Caller, pid: int, sizes: list[int], idle: float) -> dict[str, Any]:
    """RSS (KiB) before and after authorizing max(sizes) principals, after each size's first calls
    (one idle session each), after they all closed idle, and after the same principals opened theirs
    again (is what closing freed used again?)."""
    base = await settled_rss_kib(pid)
    principals = [await deploy.principal(1000 + i) for i in range(max(sizes))]
    authorized = await settled_rss_kib(pid)
    result: dict[str, Any] = {
        "rss_before_kib": base,
        "rss_authorized_kib": authorized,
        "authorize_kib_per_principal": round((authorized - base) / max(sizes), 1),
    }
    done, last = 0, authorized
    for size in sizes:
        await open_sessions(deploy, caller, principals[done:size])
        rss = await settled_rss_kib(pid)
        result[f"rss_{size}_sessions_kib"] = rss
        result[f"kib_per_session_{size}"] = round((rss - authorized) / size, 1)
        result[f"kib_per_session_{done + 1}_to_{size}"] = round((rss - last) / (size - done), 1)
        done, last = size, rss
    await caller.close()
    result["idle_close_s"] = await deploy.wait_all_closed(idle * 2 + 60)
    closed = await settled_rss_kib(pid)
    result["rss_after_idle_close_kib"] = closed
    result["given_back_kib"] = last - closed
    await open_sessions(deploy, caller, principals)
    result["rss_reopened_kib"] = reopened = await settled_rss_kib(pid)
    result["kib_per_reopened_session"] = round((reopened - closed) / len(principals), 1)
    await caller.close()
    return result


@contextlib.asynccontextmanager
async def oauth_peer(port: int) -> AsyncIterator[subprocess.Popen[bytes]]:
    """The OAuth-protected peer on ``port``, once it listens; stopped afterwards."""
    process = processes.spawn([sys.executable, str(PEER), "--port", str(port)])
    try:

        async def listening() -> bool:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return True

        if not await poll_until(listening, 30, interval=0.1, retry_on=(OSError,)):
            raise RuntimeError(f"the OAuth peer did not listen on {port}")
        yield process
    finally:
        await processes.stop(process, signal.SIGTERM, 10)


@contextlib.asynccontextmanager
async def toolmesh(work: Path, nats_url: str, database_url: str, port: int, idle: float) -> AsyncIterator[int]:
    """``toolmesh up`` (every role, one process) until its gateway is ready; yields its pid."""
    env = {
        **os.environ,
        "TOOLMESH_NATS_URL": nats_url,
        "TOOLMESH_DATABASE_URL": database_url,
        "TOOLMESH_ADMIN_TOKEN": TOKEN,
        "TOOLMESH_PORT": str(port),
        "TOOLMESH_LOG_LEVEL": "WARNING",
        "MCP_CREDENTIAL_KEY": secrets.token_urlsafe(32),
        "TOOLMESH_RATE_LIMIT_PER_SECOND": "0",
        "TOOLMESH_UPSTREAM_USER_SESSION_IDLE_SECONDS": str(idle),
    }
    process = spawn_toolmesh(work, env)
    try:

        async def ready() -> bool:
            async with httpx.AsyncClient() as client:
                return (await client.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200

        if not await poll_until(ready, 120, interval=0.5, retry_on=(httpx.TransportError,)):
            raise RuntimeError("toolmesh did not become ready (see toolmesh.log)")
        yield process.pid
    finally:
        await processes.stop(process, signal.SIGTERM, 30)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    sizes = sorted(int(n) for n in args.sessions.split(","))
    with tempfile.TemporaryDirectory(prefix="toolmesh-bench-") as tmp:
        work = Path(tmp)
        async with EmbeddedNats(work / "nats") as nats, EmbeddedPostgres(work / "pg") as postgres:
            database_url = await postgres.ensure_database("toolmesh")
            port, peer_port = free_port(), free_port()
            async with (
                oauth_peer(peer_port),
                toolmesh(work, nats.url, database_url, port, args.idle_seconds) as pid,
            ):
                deploy, caller = Deployment(port, f"http://127.0.0.1:{peer_port}"), Caller(port)
                try:
                    await deploy.register()
                    warmup = await deploy.principal(0)  # the first grant also discovers the tools
                    await deploy.wait_connected()
                    await caller.fresh()
                    for _ in range(20):
                        await caller.call(warmup)
                    note("registered, connected, warmed up")
                    mem = await memory(deploy, caller, pid, sizes, args.idle_seconds)
                    note(f"memory: {mem}")
                    mem["then_waited_for_idle_close_s"] = await deploy.wait_all_closed(args.idle_seconds * 2 + 60)
                    latency = await first_vs_following(deploy, caller, args.principals, args.following)
                    note(f"first vs following: {latency['first']} / {latency['following']}")
                    refresh = await refresh_vs_normal(deploy, caller, latency.pop("principals"))
                    note(f"refresh vs normal: {refresh['refreshed']} / {refresh['normal']}")
                finally:
                    await caller.close()
                    await deploy.close()
    return {
        "bench": "per_user_oauth",
        "upstream": "oauth_server.py (mcp SDK, Streamable HTTP, bearer auth), tool whoami",
        "first_vs_following": latency,
        "refresh_on_401": refresh,
        "memory": mem,
        "idle_seconds": args.idle_seconds,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--principals", type=int, default=20, help="principals timed on first and following calls")
    parser.add_argument("--following", type=int, default=10, help="following calls per principal")
    parser.add_argument("--sessions", default="50,100", help="idle user sessions at each memory reading")
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="idle time before a user session closes")
    print(json.dumps(asyncio.run(bench(parser.parse_args()))), flush=True)


if __name__ == "__main__":
    main()
