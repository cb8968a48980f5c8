"""Names: tools are ``{server}.{tool}`` (the first dot splits, EC-002); servers and tenants' namespaces."""

from __future__ import annotations

import re
import unicodedata

SERVER_NAME_PATTERN = r"^[a-z][a-z0-9_-]*$"
SERVER_NAME_RE = re.compile(SERVER_NAME_PATTERN)
RESERVED_NAMES = frozenset({"server-card"})
"""Names no server or endpoint may take: ``/mcp/server-card`` is the aggregate's Server Card."""
NAMESPACE_PATTERN = r"^[a-z][a-z0-9_-]{0,62}$"
STORABLE_TEXT = r"^[^\x00]*$"
"""Free text Postgres can keep (a NUL is refused in TEXT and JSONB): names, reasons, comments."""
MAX_COUNT = 2**31 - 1
"""The largest count a Postgres INTEGER column keeps (limits, offsets)."""
MAX_SERVER_NAME = 255
_INVALID_RUN = re.compile(r"[^a-z0-9_-]+")
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


def normalize_server_name(raw: str) -> str:
    """A name that matches ``SERVER_NAME_PATTERN``: accents dropped, lowercase, runs of other
    characters become ``-``, ``mcp-`` in front when it would not start with a letter, ``-server``
    after a reserved name."""
    ascii_name = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode()
    name = _INVALID_RUN.sub("-", ascii_name.strip().lower()).strip("-") or "server"
    if not name[0].isalpha():
        name = f"mcp-{name}"
    name = name[:MAX_SERVER_NAME]
    if name in RESERVED_NAMES:
        name = f"{name}-server"
    assert SERVER_NAME_RE.match(name), name
    return name
