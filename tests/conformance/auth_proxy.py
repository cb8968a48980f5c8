"""A loopback HTTP proxy that adds a bearer token: the conformance suite sends no Authorization header.

Each connection carries one request (``Connection: close`` towards the gateway); the response,
streamed or not, is piped back until the gateway closes it or the client hangs up. Everything else, the Host and Origin
headers included, passes unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator, Sequence

HEAD_LIMIT = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()


def _rewrite(head: bytes, token: str) -> bytes:
    lines = head.split(b"\r\n")
    kept = [line for line in lines[1:] if line and not line.lower().startswith((b"authorization:", b"connection:"))]
    extra = [f"Authorization: Bearer {token}".encode(), b"Connection: close"]
    return b"\r\n".join([lines[0], *kept, *extra]) + b"\r\n\r\n"


async def _serve(
    client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, ports: Iterator[int], token: str
) -> None:
    try:
        head = await client_r.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await client_r.readexactly(length) if length else b""
        up_r, up_w = await asyncio.open_connection("127.0.0.1", next(ports))
        up_w.write(_rewrite(head[:-4], token) + body)
        await up_w.drain()
        # Until the response ends, or the client hangs up (which must end a streamed response too).
        relay = asyncio.ensure_future(_pipe(up_r, client_w))
        hangup = asyncio.ensure_future(client_r.read())
        await asyncio.wait({relay, hangup}, return_when=asyncio.FIRST_COMPLETED)
        for task in (relay, hangup):
            task.cancel()
        up_w.close()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass
    finally:
        client_w.close()


@contextlib.asynccontextmanager
async def auth_proxy(target_port: int | Sequence[int], token: str) -> AsyncIterator[int]:
    """Serve on a free loopback port until the block exits; yields that port. Several target ports:
    each request goes to the next one in turn (a load balancer without stickiness)."""
    ports = itertools.cycle([target_port] if isinstance(target_port, int) else target_port)
    server = await asyncio.start_server(lambda r, w: _serve(r, w, ports, token), "127.0.0.1", 0, limit=HEAD_LIMIT)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()
