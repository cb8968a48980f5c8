"""The system under load for ``load.py``: the upstream process, toolmesh processes on fresh
backends, a cheap keep-alive HTTP/1.1 client, and the waits between them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres, free_port

BENCH = Path(__file__).resolve().parent
TOKEN = "bench-" + secrets.token_hex(8)


def rss_mb(pid: int) -> float:
    """Resident set size of one process, in MB."""
    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


# -- a cheap keep-alive HTTP/1.1 client ---------------------------------------------------------


class Http:
    """One keep-alive connection: requests with a JSON body; answers by ``Content-Length`` or chunked."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, token: str = TOKEN
    ) -> None:
        self._reader, self._writer, self._host, self._token = reader, writer, host, token

    @classmethod
    async def open(cls, port: int, token: str = TOKEN) -> Http:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, f"127.0.0.1:{port}", token)

    async def exchange(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers (lower-case names) and body of one request."""
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}\r\nAuthorization: Bearer {self._token}\r\n"
            f"Accept: application/json, text/event-stream\r\n{extra}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        self._writer.write(head + body)
        status_line = await self._reader.readline()
        if not status_line:
            raise ConnectionError("connection closed")
        answer_headers: dict[str, str] = {}
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            answer_headers[name.strip().lower()] = value.strip()
        if answer_headers.get("transfer-encoding") == "chunked":
            chunks = []
            while size := int((await self._reader.readline()).split(b";")[0], 16):
                chunks.append(await self._reader.readexactly(size))
                await self._reader.readline()
            await self._reader.readline()  # the blank line after the last chunk
            content = b"".join(chunks)
        else:
            content = await self._reader.readexactly(int(answer_headers.get("content-length", 0)))
        return int(status_line.split(b" ", 2)[1]), answer_headers, content

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        status, _, content = await self.exchange(method, path, body, headers)
        return status, content

    def close(self) -> None:
        self._writer.close()


class Pool:
    """Keep-alive connections to one port, opened as concurrency needs them (``token``: the bearer)."""

    def __init__(self, port: int, token: str = TOKEN) -> None:
        self.port, self._token = port, token
        self._idle: list[Http] = []

    async def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """One request; a kept connection the server closed meanwhile is replaced once (it saw nothing)."""
        status, _, content = await self.exchange(method, path, body, headers)
        return status, content

    async def exchange(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """Like ``request``, with the answer's headers (lower-case names)."""
        if self._idle:
            connection = self._idle.pop()
            try:
                return await self._on(connection, method, path, body, headers)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
        return await self._on(await Http.open(self.port, self._token), method, path, body, headers)

    async def _on(
        self, connection: Http, method: str, path: str, body: bytes, headers: dict[str, str] | None
    ) -> tuple[int, dict[str, str], bytes]:
        try:
            answer = await connection.exchange(method, path, body, headers)
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
def upstreams(servers: int, tools: int, tools_file: Path | None = None) -> Any:
    """``load_upstreams.py`` as a child process (``tools_file``: its real tools); yields its ports."""
    extra = ["--tools-file", str(tools_file)] if tools_file is not None else []
    process = subprocess.Popen(
        [sys.executable, str(BENCH / "load_upstreams.py"), "--servers", str(servers), "--tools", str(tools), *extra],
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

    def cpu_seconds(self) -> dict[str, float]:
        """User + system CPU seconds of each toolmesh process so far."""
        return {label: sum(psutil.Process(pid).cpu_times()[:2]) for label, pid in self.pids.items()}


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
            "TOOLMESH_NAMESPACE_MAX_SERVERS": "1000",  # every server in one namespace
            "TOOLMESH_NAMESPACE_CALLS_PER_SECOND": "0",
            "TOOLMESH_MAX_SESSIONS_PER_WORKER": "1000",  # 500 servers in one session-worker
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


async def register_http(api: Pool, name: str, port: int) -> None:
    """Register the loopback MCP server on ``port`` as the HTTP server ``name``; raise unless 201."""
    body = json.dumps(
        {"name": name, "transport_type": "HTTP", "connection_config": {"base_url": f"http://127.0.0.1:{port}/mcp"}}
    ).encode()
    status, answer = await api.request("POST", "/api/v1/aggregator/servers", body)
    if status != 201:
        raise RuntimeError(f"registration failed: {status} {answer[:300]!r}")


async def register_all(api: Pool, ports: list[int], tools_each: int, *, classified: bool) -> float:
    """Register one HTTP server per port and wait until every one is connected with its tools; seconds."""
    started = time.perf_counter()
    for index, port in enumerate(ports):
        await register_http(api, f"load{index:03d}", port)

    async def connected() -> bool:
        now = await state(api)
        done = now["connected_servers"] == len(ports) and now["total_tools"] == len(ports) * tools_each
        return done and (not classified or now["unclassified_tools"] == 0)

    await poll(connected, 600, "every server connected")
    return round(time.perf_counter() - started, 1)
