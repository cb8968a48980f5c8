"""A minimal ``/metrics`` and ``/livez`` HTTP endpoint for roles that have no HTTP API of their own.

In the distributed deployment every pod is scraped and probed; the gateway serves both on its API
port, every other role on ``TOOLMESH_METRICS_PORT`` with this server. ``/livez`` needs no token and
says nothing but that the role's event loop answers; ``/metrics`` (it names every namespace's
servers) needs a scrape token: the metrics token or the owner's (``scrape_tokens``), none when
neither is configured.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Iterable

from toolmesh import metrics
from toolmesh.config import Settings

log = logging.getLogger("toolmesh.metrics")
READ_TIMEOUT_SECONDS = 5.0


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


def _response(status: str, body: bytes, content_type: str) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tokens: tuple[str, ...]) -> None:
    try:
        async with asyncio.timeout(READ_TIMEOUT_SECONDS):
            head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        parts = request_line.split()
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines if line)}
        path = parts[1].split("?")[0] if len(parts) >= 2 and parts[0] == "GET" else None
        if path == "/livez":
            writer.write(_response("200 OK", b"ok\n", "text/plain"))
        elif path != "/metrics":
            writer.write(_response("404 Not Found", b"not found\n", "text/plain"))
        elif not authorized(tokens, headers.get("authorization")):
            writer.write(_response("401 Unauthorized", b"unauthorized\n", "text/plain"))
        else:
            writer.write(_response("200 OK", metrics.render(), metrics.CONTENT_TYPE))
        await writer.drain()
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        pass  # a scraper that went away or sent garbage gets nothing
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def serve_metrics(host: str, port: int, tokens: tuple[str, ...], stop: asyncio.Event) -> None:
    """Serve ``GET /metrics`` (to a bearer of one of ``tokens``) and ``GET /livez`` on ``host:port``
    until ``stop`` is set."""
    server = await asyncio.start_server(lambda r, w: _handle(r, w, tokens), host, port)
    log.info("metrics on http://%s:%d/metrics", host, port)
    async with server:
        await stop.wait()
