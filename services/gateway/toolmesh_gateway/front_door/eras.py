"""Results of handshake-era upstreams for clients of the 2026-07-28 protocol, and the list changes
their ``subscriptions/listen`` streams hear.

Upstream sessions speak the handshake era; a 2026-07-28 client needs ``resultType`` on every
result and ``ttlMs``/``cacheScope`` on cacheable ones. toolmesh adds what is missing: the result
is complete, immediately stale (``ttlMs`` 0) and private to the caller's authorization context
(toolmesh's views depend on the caller).
"""

from __future__ import annotations

from typing import Any

from mcp.server.caching import CACHEABLE_METHODS, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ServerEvent, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

CACHE_HINTS: dict[Any, CacheHint] = {method: CacheHint(ttl_ms=0, scope="private") for method in CACHEABLE_METHODS}
"""``Server(cache_hints=...)`` of toolmesh's MCP servers."""


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
