"""A transport read stream that tells its session when the upstream connection ended."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from types import TracebackType
from typing import Self

import anyio
from mcp.shared.message import SessionMessage

from toolmesh_session_worker.upstream.streams import MessageReader


class WatchedReadStream:
    """The transport's read stream, reporting its end (EOF or breakage) to the session."""

    def __init__(self, inner: MessageReader, on_end: Callable[[str], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> contextvars.Context | None:
        """The sender's contextvars, forwarded for the HTTP transports' context streams."""
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except anyio.EndOfStream:
            self._on_end("the upstream closed the connection")
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end("the connection to the upstream broke")
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
