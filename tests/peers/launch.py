"""Start MCP test peers as real processes on free loopback ports, and stop them afterwards."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from toolmesh.platform import processes
from toolmesh.platform.polling import poll_until

DEMO_SERVER = Path(__file__).with_name("demo_server.py")
CHAT_ENDPOINT = Path(__file__).with_name("chat_endpoint.py")
REST_SERVER = Path(__file__).with_name("rest_server.py")
OPENAPI_APP = Path(__file__).with_name("openapi_app.py")
RUG_PULL = Path(__file__).with_name("rug_pull.py")
POISONED = Path(__file__).with_name("poisoned.py")
STARTUP_SECONDS = 30.0
STOP_GRACE_SECONDS = 3.0


@dataclass
class PeerInfo:
    """How to reach a peer: ``url`` for SSE/HTTP, ``command``/``args``/``env`` for STDIO."""

    transport: str
    url: str | None = None
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def transport_type(self) -> str:
        """The toolmesh transport type: STDIO, SSE or HTTP."""
        return {"stdio": "STDIO", "sse": "SSE", "http": "HTTP"}[self.transport]

    @property
    def config(self) -> dict[str, object]:
        """A connection config for ``open_session``."""
        if self.transport == "stdio":
            return {"command": self.command, "args": list(self.args), "env": dict(self.env)}
        key = "url" if self.transport == "sse" else "base_url"
        return {key: self.url, "headers": {}}


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def demo_args(
    transport: str, *, tools: int = 0, name: str = "demo", page_size: int = 0, token: str | None = None
) -> list[str]:
    """Arguments of the demo server script (after the interpreter)."""
    args = [str(DEMO_SERVER), "--transport", transport, "--name", name, "--tools", str(tools)]
    if page_size:
        args += ["--page-size", str(page_size)]
    return [*args, "--token", token] if token is not None else args


@asynccontextmanager
async def launch_peer(
    transport: str, *, tools: int = 0, name: str = "demo", page_size: int = 0, token: str | None = None
) -> AsyncIterator[PeerInfo]:
    """The demo server: for stdio only the command to run; for sse/http a running process
    (``token``: http only, requests without it get 401)."""
    args = demo_args(transport, tools=tools, name=name, page_size=page_size, token=token)
    if transport == "stdio":
        yield PeerInfo("stdio", command=sys.executable, args=args)
        return
    port = free_port()
    path = "/sse" if transport == "sse" else "/mcp"
    argv = [sys.executable, *args, "--port", str(port)]
    async with running_process(argv, port=port) as process:
        yield PeerInfo(transport, url=f"http://127.0.0.1:{port}{path}", process=process)


@asynccontextmanager
async def launch_rest_peer(*, token: str | None = None, tools_list: str = "ok") -> AsyncIterator[str]:
    """The REST tool server (``rest_server.py``) on a free loopback port; yields its base URL."""
    port = free_port()
    argv = [sys.executable, str(REST_SERVER), "--port", str(port), "--tools-list", tools_list]
    if token is not None:
        argv += ["--token", token]
    async with running_process(argv, port=port):
        yield f"http://127.0.0.1:{port}"


@asynccontextmanager
async def launch_openapi_app(key: str) -> AsyncIterator[str]:
    """The OpenAPI-described API (``openapi_app.py``) on a free loopback port; yields its origin
    (the document at ``/openapi.json``)."""
    port = free_port()
    async with running_process([sys.executable, str(OPENAPI_APP), "--port", str(port), "--key", key], port=port):
        yield f"http://127.0.0.1:{port}"


@asynccontextmanager
async def launch_rug_pull() -> AsyncIterator[str]:
    """The hostile MCP server (``rug_pull.py``) on a free loopback port; yields its base URL (MCP at
    ``/mcp``, the attacker's ``/rug`` and ``/canary`` beside it)."""
    port = free_port()
    async with running_process([sys.executable, str(RUG_PULL), "--port", str(port)], port=port):
        yield f"http://127.0.0.1:{port}"


@asynccontextmanager
async def launch_poisoned(spec: Path) -> AsyncIterator[str]:
    """The hostile server of the poisoning scans (``poisoned.py``) serving the definitions of ``spec`` on
    a free loopback port; yields its base URL (MCP at ``/mcp``, the attacker's ``/rug`` and ``/canary``)."""
    port = free_port()
    async with running_process([sys.executable, str(POISONED), "--port", str(port), "--spec", str(spec)], port=port):
        yield f"http://127.0.0.1:{port}"


@asynccontextmanager
async def launch_chat_endpoint(*, failing: bool = False) -> AsyncIterator[str]:
    """The OpenAI-compatible chat endpoint (``chat_endpoint.py``) on a free loopback port; yields its
    base URL (``.../v1``)."""
    port = free_port()
    argv = [sys.executable, str(CHAT_ENDPOINT), "--port", str(port), *(["--failing"] if failing else [])]
    async with running_process(argv, port=port):
        yield f"http://127.0.0.1:{port}/v1"


@asynccontextmanager
async def running_process(
    argv: Sequence[str], *, port: int, env: Mapping[str, str] | None = None
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """Run ``argv`` in its own process group until it accepts TCP on ``port``; stop its whole tree after."""
    process = processes.spawn(argv, env={**os.environ, **(env or {})}, stdout=None, stderr=None)
    try:
        await _wait_listening(process, port)
        yield process
    finally:
        await processes.stop(process, signal.SIGTERM, STOP_GRACE_SECONDS)


async def _wait_listening(process: subprocess.Popen[bytes], port: int) -> None:
    async def listening_or_exited() -> bool:
        if processes.exited(process):
            return True
        stream = await anyio.connect_tcp("127.0.0.1", port)
        await stream.aclose()
        return True

    if not await poll_until(listening_or_exited, STARTUP_SECONDS, retry_on=(OSError,)):
        raise RuntimeError(f"peer did not listen on {port} within {STARTUP_SECONDS:.0f}s")
    if processes.exited(process):
        raise RuntimeError(f"peer exited with code {process.returncode} before listening on {port}")
