"""Running the gateway's HTTP server inside a role's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import uvicorn

from toolmesh.credentials import CredentialBox
from toolmesh.platform.http_serving import Server, bind_socket, serve_until
from toolmesh.platform.runtime import Backends
from toolmesh_gateway.app import close_app, create_app, http_entry
from toolmesh_gateway.nats_api.server import NatsApi

log = logging.getLogger("toolmesh.gateway")


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
        # open event streams would hold the graceful shutdown up: they end as it starts
        await serve_until(Server(config, "HTTP API", log), sock, stop, on_stop=app.state.event_hub.end_all)
