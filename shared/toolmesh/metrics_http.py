"""A minimal ``/metrics`` and ``/livez`` HTTP endpoint for roles that have no HTTP API of their own.

In the distributed deployment every pod is scraped and probed; the gateway serves both on its API
port, every other role on ``TOOLMESH_METRICS_PORT`` with this server. ``/livez`` needs no token and
says nothing but that the role's event loop answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging

from toolmesh import metrics

log = logging.getLogger("toolmesh.metrics")
READ_TIMEOUT_SECONDS = 5.0


def authorized(token: str | None, authorization: str | None) -> bool:
    """True when no metrics token is configured, or the request carries it as a bearer token."""
    if not token:
        return True
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def _response(status: str, body: bytes, content_type: str) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, token: str | None) -> None:
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
        elif not authorized(token, headers.get("authorization")):
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


async def serve_metrics(host: str, port: int, token: str | None, stop: asyncio.Event) -> None:
    """Serve ``GET /metrics`` and ``GET /livez`` on ``host:port`` until ``stop`` is set."""
    server = await asyncio.start_server(lambda r, w: _handle(r, w, token), host, port)
    log.info("metrics on http://%s:%d/metrics", host, port)
    async with server:
        await stop.wait()
