"""Running the gateway's HTTP server inside a role's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import uvicorn

from toolmesh.credentials import CredentialBox
from toolmesh.runtime import Backends
from toolmesh_gateway.app import close_app, create_app, http_entry
from toolmesh_gateway.nats_api.server import NatsApi

log = logging.getLogger("toolmesh.gateway")


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling (the process's stop event decides), saying where it
    listens once it does."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        for sock in sockets or ():
            host, port = sock.getsockname()[:2]
            log.info("HTTP API listening on %s", f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}")


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind the listening socket up front, so a taken port is a plain ``OSError`` for the caller."""
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and accepted
    # sockets inherit it; with proto 0 Nagle + delayed ACK add ~40 ms to every response.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


async def run_gateway(backends: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Serve HTTP on the configured host and port, and the NATS API, until ``stop`` is set."""
    async with contextlib.AsyncExitStack() as stack:
        app = await create_app(backends, box)
        stack.push_async_callback(close_app, app)
        api = await NatsApi.start(app)
        stack.push_async_callback(api.close)
        sock = bind_socket(backends.settings.host, backends.settings.port)
        stack.callback(sock.close)
        entry = http_entry(app)
        proxies = list(backends.settings.trusted_proxies)
        config = uvicorn.Config(
            entry,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
            proxy_headers=bool(proxies),  # the client is the peer unless a trusted proxy forwards it
            forwarded_allow_ips=proxies or None,
        )
        server = _Server(config)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if serving.done():
                serving.result()  # the server stopped by itself: surface why
        finally:
            server.should_exit = True
            app.state.event_hub.end_all()  # open event streams would hold the graceful shutdown up
            stopping.cancel()
            await asyncio.gather(serving, stopping, return_exceptions=True)
