"""The authorization server's addresses: its issuer, the MCP endpoints it issues tokens for (RFC 8707
resources), and the metadata URLs a client discovers them from (RFC 9728)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from starlette.requests import Request

from toolmesh.platform.config import Settings

MCP_PATH = "/mcp"
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
AUTHORIZATION_SERVER_METADATA_PATH = "/.well-known/oauth-authorization-server"
CONSENT_PAGE = "/ui/#/consent/"
"""The console's consent page (the console is served under ``/ui/``, routers/console.py)."""
SCOPE = "mcp"
"""The one scope a token of this gateway carries: use of the MCP endpoint it names."""
OFFLINE_SCOPE = "offline_access"
_ENDPOINT = re.compile(r"^/mcp(/[A-Za-z0-9_.-]{1,128})?$")


def base_url(settings: Settings, request: Request) -> str:
    """``TOOLMESH_PUBLIC_URL``, else the address this request reached the gateway at (no trailing /)."""
    return (settings.public_url or str(request.base_url)).rstrip("/")


def endpoint_path(path: str) -> str | None:
    """The MCP endpoint a request path or resource path names (``/mcp`` or ``/mcp/{name}``), else None."""
    path = path.rstrip("/") or "/"
    return path if _ENDPOINT.match(path) else None


def resource_path(resource: str, base: str) -> str | None:
    """The endpoint an RFC 8707 ``resource`` names when it is one of this gateway's MCP endpoints
    at ``base`` (same scheme, host and port; no query or fragment), else None."""
    parts, home = urlsplit(resource), urlsplit(base)
    if parts.query or parts.fragment or (parts.scheme, parts.netloc.lower()) != (home.scheme, home.netloc.lower()):
        return None
    return endpoint_path(parts.path)


def resource_metadata_url(base: str, endpoint: str) -> str:
    """Where a client finds the protected-resource metadata of ``endpoint`` (RFC 9728 §3.1)."""
    return f"{base}{RESOURCE_METADATA_PATH}{endpoint}"


def challenge(base: str, endpoint: str, error: str | None = None) -> str:
    """The ``WWW-Authenticate`` value of a 401 on ``endpoint``: where its metadata is, which scope."""
    parts = [f'resource_metadata="{resource_metadata_url(base, endpoint)}"', f'scope="{SCOPE}"']
    if error:
        parts.insert(0, f'error="{error}"')
    return "Bearer " + ", ".join(parts)
