"""A loopback TCP proxy between one role process and NATS that a test can cut and mend (a partition of
that process alone: it and its STDIO children keep running)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

CHUNK = 65536


class NatsProxy:
    """Listens on 127.0.0.1 (an ephemeral port) and pipes each connection to ``upstream``.

    ``sever()`` closes every open connection and stalls new ones (accepted and held, nothing sent, as
    a partitioned peer looks); ``restore()`` drops the stalled ones and lets new connections through.
    """

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 4222)
        self._credentials = parts.netloc.rpartition("@")[0]
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._restored = asyncio.Event()
        self._restored.set()
        self.port = 0

    @property
    def url(self) -> str:
        """The NATS URL (the upstream's credentials included) a role process is given instead of the real one."""
        at = f"{self._credentials}@" if self._credentials else ""
        return f"nats://{at}127.0.0.1:{self.port}"

    @property
    def severed(self) -> bool:
        return not self._restored.is_set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and close every connection."""
        if self._server is not None:
            self._server.close()
        self._restored.set()
        self._drop_all()

    def sever(self) -> None:
        """Close every open connection; hold new ones silent until ``restore()``."""
        self._restored.clear()
        self._drop_all()

    def restore(self) -> None:
        """Let connections through again (the held ones are closed, so their clients reconnect)."""
        self._restored.set()

    def _drop_all(self) -> None:
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.severed:
            await self._restored.wait()
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._open.update((writer, up_writer))
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for each in (writer, up_writer):
                self._open.discard(each)
                each.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until either side closes; then close the other."""
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()


@contextlib.asynccontextmanager
async def nats_proxy(upstream: str) -> AsyncIterator[NatsProxy]:
    """A running proxy to ``upstream`` (a ``nats://host:port`` URL), closed after."""
    proxy = NatsProxy(upstream)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
