"""Results of handshake-era upstreams for clients of the 2026-07-28 protocol, and the list changes
their ``subscriptions/listen`` streams hear.

Upstream sessions speak the handshake era; a 2026-07-28 client needs ``resultType`` on every
result and ``ttlMs``/``cacheScope`` on cacheable ones. toolmesh adds what is missing: the result
is complete, immediately stale (``ttlMs`` 0) and private to the caller's authorization context
(toolmesh's views depend on the caller).
"""

from __future__ import annotations

from typing import Any

import mcp_types
from mcp.server.caching import CACHEABLE_METHODS, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ServerEvent, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

CACHE_HINTS: dict[Any, CacheHint] = {method: CacheHint(ttl_ms=0, scope="private") for method in CACHEABLE_METHODS}
"""``Server(cache_hints=...)`` of toolmesh's MCP servers."""
ENVELOPE = frozenset(
    {
        mcp_types.PROTOCOL_VERSION_META_KEY,
        mcp_types.CLIENT_INFO_META_KEY,
        mcp_types.CLIENT_CAPABILITIES_META_KEY,
        mcp_types.LOG_LEVEL_META_KEY,
    }
)
"""The 2026-07-28 request envelope: relayed apart (``UpstreamRequestRpc.envelope``), in that era only."""


def envelope_of(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The 2026-07-28 envelope of the request's ``_meta``, as its client sent it."""
    meta = (ctx.params or {}).get("_meta")
    return {k: v for k, v in meta.items() if k in ENVELOPE} if isinstance(meta, dict) else {}


def for_client(ctx: ServerRequestContext[Any, Any], result: dict[str, Any]) -> dict[str, Any]:
    """``result`` as the client's protocol era wants it (cache fields come from ``CACHE_HINTS``)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and "resultType" not in result:
        return {**result, "resultType": "complete"}
    return result


def list_changes(tools: bool, resources: bool, prompts: bool) -> list[ServerEvent]:
    """The ``subscriptions/listen`` events of the lists that changed (2026-07-28 clients)."""
    events: list[ServerEvent] = []
    if tools:
        events.append(ToolsListChanged())
    if resources:
        events.append(ResourcesListChanged())
    if prompts:
        events.append(PromptsListChanged())
    return events
