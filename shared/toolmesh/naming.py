"""Names: tools are ``{server}.{tool}`` (the first dot splits, EC-002); servers and tenants' namespaces."""

from __future__ import annotations

import re

SERVER_NAME_PATTERN = r"^[a-z][a-z0-9_-]*$"
SERVER_NAME_RE = re.compile(SERVER_NAME_PATTERN)
RESERVED_NAMES = frozenset({"server-card"})
"""Names no server or endpoint may take: ``/mcp/server-card`` is the aggregate's Server Card."""
NAMESPACE_PATTERN = r"^[a-z][a-z0-9_-]{0,62}$"
STORABLE_TEXT = r"^[^\x00]*$"
"""Free text Postgres can keep (a NUL is refused in TEXT and JSONB): names, reasons, comments."""
MAX_COUNT = 2**31 - 1
"""The largest count a Postgres INTEGER column keeps (limits, offsets)."""
DEFAULT_NAMESPACE = "default"
"""Where everything lives that was created before namespaces, or by a principal that named none."""


def namespace_tool(server_name: str, tool_name: str) -> str:
    """The public name of an upstream tool."""
    return f"{server_name}.{tool_name}"


def split_namespaced(name: str) -> tuple[str, str] | None:
    """``"a.b.c"`` -> ``("a", "b.c")``; ``None`` when the name has no dot."""
    if "." not in name:
        return None
    server, tool = name.split(".", 1)
    return server, tool


def unreserved(name: str) -> str:
    """``name``, unless it is one of ``RESERVED_NAMES`` (a ``ValueError``: a validation error)."""
    if name in RESERVED_NAMES:
        raise ValueError(f"{name!r} is reserved: /mcp/{name} is the aggregate's Server Card")
    return name
