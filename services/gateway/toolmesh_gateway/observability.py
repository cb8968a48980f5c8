"""``GET /metrics`` (Prometheus text format) and a span around every HTTP request.

``/metrics`` names every namespace's servers, so only the deployment's owner reads it: a scraper
sends ``TOOLMESH_METRICS_TOKEN`` (``authorization`` in the scrape config) or an owner's key; any
other key is refused (403), no key at all too (401).
"""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, Request, Response
from opentelemetry.trace import SpanKind
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolmesh.contracts.keys import Role
from toolmesh.errors import Forbidden
from toolmesh.platform import metrics
from toolmesh.platform.metrics_http import authorized, scrape_tokens
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store import queries
from toolmesh.platform.telemetry import mark_error, span
from toolmesh_gateway.auth import Authenticator

log = logging.getLogger("toolmesh.gateway")
router = APIRouter(tags=["observability"])
INVENTORY_TIMEOUT_SECONDS = 2.0
_TRACE_HEADERS = (b"traceparent", b"tracestate")


async def _refresh_inventory(b: Backends) -> None:
    """Servers by status and tool counts from the read model, for this scrape (skipped when slow)."""
    try:
        async with asyncio.timeout(INVENTORY_TIMEOUT_SECONDS):
            counts = await queries.status_counts(b.db, None)
            tools = await queries.tool_counts(b.db, None)
    except Exception as exc:  # a scrape still answers, with the process's own metrics
        log.warning("metrics: read model unavailable: %s", type(exc).__name__)
        return
    metrics.set_inventory(counts, tools_total=int(tools["total"]), tools_classified=int(tools["classified"]))


@router.get("/metrics", include_in_schema=False)
async def prometheus_metrics(request: Request) -> Response:
    """The system contract's metrics, in the Prometheus text format."""
    b: Backends = request.app.state.backends
    authorization = request.headers.get("authorization")
    if not authorized(scrape_tokens(b.settings), authorization):
        authenticator: Authenticator = request.app.state.authenticator
        source = request.client.host if request.client else None
        principal = await authenticator.principal_from(authorization, source)
        principal.require_api_access()  # not an owner's OAuth token (for one MCP endpoint) nor a limited key
        if principal.role is not Role.OWNER:
            raise Forbidden("Metrics are for the owner and the metrics token", {"role": str(principal.role)})
    await _refresh_inventory(b)
    return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)


class TracingMiddleware:
    """A server span per HTTP request, continuing an incoming ``traceparent`` (no-op cost when off)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        remote = {k.decode(): v.decode("latin-1") for k, v in scope["headers"] if k in _TRACE_HEADERS}
        attributes = {"http.request.method": scope["method"], "url.path": scope["path"]}
        with span(f"HTTP {scope['method']}", kind=SpanKind.SERVER, remote=remote, attributes=attributes) as current:
            status = 500

            async def send_status(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await self.app(scope, receive, send_status if current is not None else send)
            finally:
                if current is not None:
                    route = scope.get("route")
                    path = getattr(route, "path", None)
                    if path:
                        current.update_name(f"HTTP {scope['method']} {path}")
                        current.set_attribute("http.route", path)
                    current.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        mark_error(current, f"HTTP {status}")
