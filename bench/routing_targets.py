"""What ``routing.py`` calls: the demo tool directly over MCP (stdio, and Streamable HTTP), through the
REST API, and through ``/mcp``.

Each target gives independent callers; the REST one uses a cheap keep-alive HTTP/1.1 client over
asyncio streams, since an httpx client would measure itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from toolmesh.platform import processes
from toolmesh.platform.polling import poll_until

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "tests" / "peers" / "demo_server.py"
TOKEN = "bench-" + secrets.token_hex(8)
TOOL, ARGUMENTS = "echo", {"text": "hello"}
HANDSHAKE, MODERN = "handshake", "2026-07-28"
"""The protocol eras a column's SDK client speaks."""
Call = Callable[[], Awaitable[None]]


# -- a cheap HTTP/1.1 keep-alive client -------------------------------------------------------


class HttpConnection:
    """One keep-alive connection that POSTs JSON and reads ``Content-Length`` bodies."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self._reader = reader
        self._writer = writer
        self._host = host

    @classmethod
    async def open(cls, host: str, port: int) -> HttpConnection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, f"{host}:{port}")

    async def post(self, path: str, body: bytes, token: str) -> tuple[int, bytes]:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self._host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        self._writer.write(head + body)
        status_line = await self._reader.readline()
        length = 0
        while True:
            line = await self._reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return int(status_line.split(b" ", 2)[1]), await self._reader.readexactly(length)

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()


# -- targets -------------------------------------------------------------------------------------


class Target(Protocol):
    """A way to call the demo tool: ``callers(n)`` gives ``n`` independent callers."""

    name: str

    async def callers(self, n: int) -> list[Call]: ...

    async def close(self) -> None: ...


class DirectMcp:
    """The demo peer over its own stdio session with the ``mcp`` client (concurrent calls multiplex)."""

    name = "direct"

    def __init__(self) -> None:
        self._stack = contextlib.AsyncExitStack()
        self._session: ClientSession | None = None

    async def start(self) -> None:
        params = StdioServerParameters(command=sys.executable, args=[str(DEMO), "--transport", "stdio"])
        read, write = await self._stack.enter_async_context(stdio_client(params))
        self._session = await self._stack.enter_async_context(ClientSession(read, write))
        await self._session.initialize()

    async def callers(self, n: int) -> list[Call]:
        session = self._session
        assert session is not None

        async def call() -> None:
            result = await session.call_tool(TOOL, ARGUMENTS)
            if result.is_error:
                raise RuntimeError(f"direct call failed: {result}")

        return [call] * n

    async def close(self) -> None:
        await self._stack.aclose()


class RestApi:
    """``POST /api/v1/tools/call``, one keep-alive connection per caller."""

    name = "rest"

    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._connections: list[HttpConnection] = []
        self._body = json.dumps({"name": f"demo.{TOOL}", "arguments": ARGUMENTS}).encode()

    async def callers(self, n: int) -> list[Call]:
        # Fresh connections per run: the server closes keep-alive connections idle for 5 s.
        await self.close()
        self._connections = [await HttpConnection.open(self._host, self._port) for _ in range(n)]

        def caller(connection: HttpConnection) -> Call:
            async def call() -> None:
                status, body = await connection.post("/api/v1/tools/call", self._body, TOKEN)
                if status != 200:
                    raise RuntimeError(f"toolmesh call failed: {status} {body[:300]!r}")

            return call

        return [caller(c) for c in self._connections[:n]]

    async def close(self) -> None:
        for connection in self._connections:
            await connection.close()
        self._connections = []


class DirectHttpMcp:
    """The same SDK client as ``McpFrontDoor`` calling the demo peer over Streamable HTTP directly
    (``demo_server.py --transport http`` in its own process): the column ``/mcp`` is compared with."""

    def __init__(self, port: int, era: str = HANDSHAKE) -> None:
        self.name = "direct_http" if era == HANDSHAKE else "direct_http_2026"
        self.era = era
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None
        self.streams = Streams()
        self._stack = contextlib.AsyncExitStack()
        self._session: ClientSession | None = None

    async def start(self, deadline: float) -> None:
        """Start the peer, wait until it listens, and open one session."""
        self.process = _spawn_http_peer(self.port)

        async def listening() -> bool:
            _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            writer.close()
            return True

        if not await poll_until(listening, deadline - time.monotonic(), interval=0.1, retry_on=(OSError,)):
            raise RuntimeError(f"the direct HTTP peer did not listen on {self.port}")
        self._session = await _sdk_session(self._stack, self.url, {}, self.era, self.streams)

    async def callers(self, n: int) -> list[Call]:
        session = self._session
        assert session is not None

        async def call() -> None:
            result = await session.call_tool(TOOL, ARGUMENTS)
            if result.is_error:
                raise RuntimeError(f"direct HTTP call failed: {result}")

        return [call] * n

    async def close(self) -> None:
        await self._stack.aclose()
        if self.process is not None:
            await processes.stop(self.process, signal.SIGKILL, 0)


def _spawn_http_peer(port: int) -> subprocess.Popen[bytes]:
    return processes.spawn([sys.executable, str(DEMO), "--transport", "http", "--port", str(port)])


class Streams:
    """Counts the answers to POSTs that were SSE streams (a plain call should get ``application/json``)."""

    def __init__(self) -> None:
        self.sse = 0
        self.posts = 0

    async def seen(self, response: httpx2.Response) -> None:
        """An httpx2 response hook."""
        if response.request.method == "POST":
            self.posts += 1
            self.sse += response.headers.get("content-type", "").startswith("text/event-stream")


async def _sdk_session(
    stack: contextlib.AsyncExitStack,
    url: str,
    headers: dict[str, str],
    era: str = HANDSHAKE,
    streams: Streams | None = None,
) -> ClientSession:
    """An SDK session over Streamable HTTP with a keep-alive pool for every caller: initialized (the
    handshake era) or discovered (``MODERN``: 2026-07-28, stateless, every call its own POST)."""
    # The default pool keeps only 20 idle connections, which would make c64 reconnect all the time.
    limits = httpx2.Limits(max_connections=256, max_keepalive_connections=256)
    hooks = {"response": [streams.seen]} if streams is not None else {}
    http = await stack.enter_async_context(
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120), limits=limits, event_hooks=hooks)
    )
    read, write = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    session = await stack.enter_async_context(ClientSession(read, write))
    if era == MODERN:
        await session.discover()
    else:
        await session.initialize()
    return session


class McpFrontDoor:
    """toolmesh's ``/mcp`` (all-tools mode) with the SDK's Streamable HTTP client: ONE session, the
    callers' ``call_tool``s multiplex on it (each one is its own POST on the httpx2 pool)."""

    client = (
        "mcp SDK ClientSession over streamable_http_client (httpx2.AsyncClient, bearer header), "
        "one session, concurrent call_tool; runs in the bench process"
    )

    def __init__(self, host: str, port: int, era: str = HANDSHAKE) -> None:
        self.name = "mcp" if era == HANDSHAKE else "mcp_2026"
        self.era = era
        self.url = f"http://{host}:{port}/mcp?mode=all"
        self.tool = ""
        self.streams = Streams()
        self._stack = contextlib.AsyncExitStack()
        self._session: ClientSession | None = None

    async def start(self, deadline: float) -> None:
        """Open the session, then wait until ``tools/list`` shows the demo peer's echo tool."""
        headers = {"Authorization": f"Bearer {TOKEN}"}
        session = self._session = await _sdk_session(self._stack, self.url, headers, self.era, self.streams)
        names: list[str] = []

        async def single_match() -> str | None:
            names[:] = [tool.name for tool in (await session.list_tools()).tools]
            matches = [n for n in names if n.startswith("demo") and n.endswith(TOOL)]
            return matches[0] if len(matches) == 1 else None

        # The front door's listing follows the catalog feed, which may lag registration.
        tool = await poll_until(single_match, deadline - time.monotonic(), interval=0.2)
        if not tool:
            raise RuntimeError(f"no single demo {TOOL} tool in /mcp tools/list: {names}")
        self.tool = tool

    async def callers(self, n: int) -> list[Call]:
        session = self._session
        assert session is not None

        async def call() -> None:
            result = await session.call_tool(self.tool, ARGUMENTS)
            if result.is_error:
                raise RuntimeError(f"/mcp call failed: {result}")

        return [call] * n

    async def close(self) -> None:
        await self._stack.aclose()


# -- measurement ---------------------------------------------------------------------------------
