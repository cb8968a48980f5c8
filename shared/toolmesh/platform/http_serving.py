"""Serving an ASGI app with uvicorn inside a role's event loop, until the role's stop event is set."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterator

import uvicorn


class Server(uvicorn.Server):
    """uvicorn without its own signal handling (the process's stop event decides), saying where it
    listens once it does."""

    def __init__(self, config: uvicorn.Config, what: str, log: logging.Logger) -> None:
        super().__init__(config)
        self.what = what
        self.log = log

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        for sock in sockets or ():
            host, port = sock.getsockname()[:2]
            self.log.info(
                "%s listening on %s", self.what, f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
            )


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind the listening socket up front, so a taken port is a plain ``OSError`` for the caller
    (uvicorn binding it would exit the process)."""
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and accepted
    # sockets inherit it; with proto 0 Nagle + delayed ACK add ~40 ms to every response.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


async def serve_until(
    server: uvicorn.Server, sock: socket.socket, stop: asyncio.Event, on_stop: Callable[[], None] | None = None
) -> None:
    """Run ``server`` on ``sock`` until ``stop`` is set (then a graceful shutdown, ``on_stop`` called
    first thing) or until it ends by itself (its error raised here)."""
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done():
            serving.result()  # the server stopped by itself: surface why
    finally:
        server.should_exit = True
        if on_stop is not None:
            on_stop()
        stopping.cancel()
        await asyncio.gather(serving, stopping, return_exceptions=True)
