"""DNS-rebinding protection of the MCP endpoints (``/mcp`` and ``/mcp/...``), as the MCP
Streamable HTTP transport requires.

A request carrying an ``Origin`` outside ``TOOLMESH_ALLOWED_ORIGINS`` is refused with 403; a
request without one (a non-browser client) passes. When the gateway is bound to loopback, the
``Host`` must be a loopback name too (or one of ``TOOLMESH_ALLOWED_HOSTS``): a rebound DNS name
pointing at 127.0.0.1 is refused even from a page that sends no Origin.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from toolmesh.errors import Forbidden
from toolmesh.loopback import host_of, is_loopback_host
from toolmesh_gateway.scope_headers import header

ANY_ORIGIN = "*"


def origin_allowed(origin: str, allowed: Iterable[str]) -> bool:
    """True when ``origin`` matches an entry: exactly, ``scheme://host:*`` (any port or none), or ``*``."""
    origin = origin.strip().rstrip("/").lower()
    for entry in allowed:
        pattern = entry.strip().rstrip("/").lower()
        if pattern == ANY_ORIGIN or pattern == origin:
            return True
        if pattern.endswith(":*"):
            base = pattern[:-2]
            if origin == base or (origin.startswith(base + ":") and origin[len(base) + 1 :].isdigit()):
                return True
    return False


def host_allowed(host: str | None, allowed: Iterable[str]) -> bool:
    """True for a loopback ``Host`` (any port) or one whose name is listed in ``allowed``."""
    if not host:
        return True  # HTTP/1.0 without Host: not a browser
    name = host_of(host)
    return is_loopback_host(name) or name in {h.strip().lower() for h in allowed}


class OriginGuard:
    """ASGI middleware applying the Origin (and, when bound to loopback, Host) checks to ``prefix``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        prefix: str,
        allowed_origins: Iterable[str],
        allowed_hosts: Iterable[str],
        check_host: bool,
    ) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/")
        self.allowed_origins = tuple(allowed_origins)
        self.allowed_hosts = tuple(allowed_hosts)
        self.check_host = check_host

    def _guarded(self, path: str) -> bool:
        return path == self.prefix or path.startswith(self.prefix + "/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._guarded(scope["path"]):
            await self.app(scope, receive, send)
            return
        origin, host = header(scope, "origin"), header(scope, "host")
        error: Forbidden | None = None
        if origin is not None and not origin_allowed(origin, self.allowed_origins):
            error = Forbidden(f"Origin not allowed: {origin}", {"origin": origin})
        elif self.check_host and not host_allowed(host, self.allowed_hosts):
            error = Forbidden(f"Host not allowed for a gateway bound to loopback: {host or ''}", {"host": host or ""})
        if error is not None:
            await JSONResponse(error.body(), status_code=error.status)(scope, receive, send)
            return
        await self.app(scope, receive, send)
