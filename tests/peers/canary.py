"""A canary listener on 127.0.0.1: counts every connection and request it receives, answers as told."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

Answer = Callable[[str, str], tuple[int, dict[str, str], bytes]]
"""``(method, target) -> (status, headers, body)``."""
READ_SECONDS = 10.0


def ok(method: str, target: str) -> tuple[int, dict[str, str], bytes]:
    """200 with a small JSON body."""
    return 200, {"Content-Type": "application/json"}, b'{"status": "ok"}'


def redirect_to(location: str) -> Answer:
    """An answer that redirects every request (307, so a POST stays a POST) to ``location``."""

    def answer(method: str, target: str) -> tuple[int, dict[str, str], bytes]:
        return 307, {"Location": location}, b""

    return answer


@dataclass
class Canary:
    """What reached the listener: TCP connections, and the request line of each HTTP request."""

    port: int = 0
    connections: int = 0
    requests: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.asynccontextmanager
async def running_canary(answer: Answer = ok) -> AsyncIterator[Canary]:
    """A listener on a free loopback port for the block's duration."""
    canary = Canary()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        canary.connections += 1
        try:
            async with asyncio.timeout(READ_SECONDS):
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                method, target = head.split(" ", 2)[:2]
                canary.requests.append(f"{method} {target}")
                length = next(
                    (
                        int(line.split(":", 1)[1])
                        for line in head.split("\r\n")
                        if line.lower().startswith("content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
            status, headers, body = answer(method, target)
            lines = [f"HTTP/1.1 {status} Canary", f"Content-Length: {len(body)}", "Connection: close"]
            lines += [f"{name}: {value}" for name, value in headers.items()]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await writer.drain()
        except (TimeoutError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # not HTTP (a TLS hello) or cut short: the connection is counted all the same
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    canary.port = server.sockets[0].getsockname()[1]
    async with server:
        yield canary
