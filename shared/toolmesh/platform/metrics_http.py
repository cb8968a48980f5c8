"""The ``/metrics`` and ``/livez`` HTTP endpoint of the roles that have no HTTP API of their own.

In the distributed deployment every pod is scraped and probed; the gateway serves both on its API
port, every other role on ``TOOLMESH_METRICS_PORT`` with this small ASGI app (prometheus_client's
exposition behind the token check) served by uvicorn. ``/livez`` needs no token and
says nothing but that the role's event loop answers; ``/metrics`` (it names every namespace's
servers) needs a scrape token: the metrics token or the owner's (``scrape_tokens``), none when
neither is configured.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Iterable

import uvicorn
from prometheus_client import make_asgi_app
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from toolmesh.platform import metrics
from toolmesh.platform.config import Settings
from toolmesh.platform.http_serving import Server, bind_socket, serve_until

log = logging.getLogger("toolmesh.metrics")
GRACEFUL_SHUTDOWN_SECONDS = 5


def scrape_tokens(settings: Settings) -> tuple[str, ...]:
    """The bearer tokens a scrape may carry: the metrics token and the owner's, those configured."""
    return tuple(t for t in (settings.metrics_token, settings.admin_token) if t)


def authorized(tokens: Iterable[str], authorization: str | None) -> bool:
    """True when the request carries one of ``tokens`` as a bearer token (never when there is none)."""
    scheme, _, given = (authorization or "").partition(" ")
    presented = given.strip().encode()
    if scheme.lower() != "bearer" or not presented:
        return False
    return any(hmac.compare_digest(presented, token.encode()) for token in tokens if token)


def metrics_app(tokens: tuple[str, ...]) -> ASGIApp:
    """``GET /livez`` for anyone; ``GET /metrics`` (prometheus_client's exposition of this
    process's registry) for a bearer of one of ``tokens``, 401 for anyone else; 404 for the rest."""
    exposition = make_asgi_app(metrics.registry())

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        get = scope["method"] == "GET"
        if get and scope["path"] == "/metrics":
            if authorized(tokens, Headers(scope=scope).get("authorization")):
                await exposition(scope, receive, send)
                return
            response = PlainTextResponse("unauthorized\n", 401)
        elif get and scope["path"] == "/livez":
            response = PlainTextResponse("ok\n")
        else:
            response = PlainTextResponse("not found\n", 404)
        await response(scope, receive, send)

    return app


async def serve_metrics(host: str, port: int, tokens: tuple[str, ...], stop: asyncio.Event) -> None:
    """Serve ``metrics_app(tokens)`` on ``host:port`` until ``stop`` is set.

    Raises:
        OSError: ``host:port`` cannot be bound (e.g. the port is taken).
    """
    sock = bind_socket(host, port)
    try:
        config = uvicorn.Config(
            metrics_app(tokens),
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        )
        await serve_until(Server(config, "metrics", log), sock, stop)
    finally:
        sock.close()
