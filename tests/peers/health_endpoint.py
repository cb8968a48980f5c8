"""A controllable HTTP health endpoint on 127.0.0.1 for BR-006 tests.

    async with HealthEndpoint() as health:
        health.mode = "error"   # "ok" -> 200, "error" -> 500, "missing" -> 404, "hang" -> never answers
        health.script = ["hang", "hang", "ok"]  # the next requests' answers, then ``mode`` again

It counts the requests it got, so a test can see how often a server was checked.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Literal, Self

Mode = Literal["ok", "error", "missing", "hang"]
_STATUS = {"ok": "200 OK", "error": "500 Internal Server Error", "missing": "404 Not Found"}


class HealthEndpoint:
    """An HTTP server whose answer to every GET is set by ``mode``."""

    def __init__(self) -> None:
        self.mode: Mode = "ok"
        self.script: list[Mode] = []
        self.requests = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/health"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            mode = self.script.pop(0) if self.script else self.mode
            if mode == "hang":
                await asyncio.sleep(3600)
            body = mode.encode()
            writer.write(
                f"HTTP/1.1 {_STATUS[mode]}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)
