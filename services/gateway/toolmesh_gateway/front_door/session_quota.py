"""MCP client sessions a gateway replica holds, counted per namespace against its fair share.

A session counts from the request that opens it (or from its adoption by this replica) until this
replica lets it go (ended, expired, or its opening request failed). Opening one more than the
namespace's ``max_mcp_sessions`` is refused with 409 ``LIMIT_EXCEEDED``; adopting a session another
replica opened is never refused (it already exists).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from toolmesh.errors import LimitExceeded
from toolmesh.metrics import record_limit_rejection


class NamespaceSessions:
    """Which namespace each held session belongs to, and how many each namespace holds."""

    def __init__(self, limit: Callable[[str], int]) -> None:
        self._limit = limit
        self._namespace_of: dict[str, str] = {}
        self._held: Counter[str] = Counter()

    def held_by(self, namespace: str) -> int:
        """Sessions of ``namespace`` this replica holds."""
        return self._held[namespace]

    def open(self, session_id: str, namespace: str) -> None:
        """Count a session being opened; ``LimitExceeded`` when its namespace holds all it may."""
        limit = self._limit(namespace)
        if self._held[namespace] >= limit:
            record_limit_rejection("namespace_mcp_sessions")
            raise LimitExceeded(
                f"MCP session limit of namespace '{namespace}' reached ({limit} on this gateway)",
                {"namespace": namespace, "namespace_max_mcp_sessions": limit},
            )
        self.adopt(session_id, namespace)

    def adopt(self, session_id: str, namespace: str) -> None:
        """Count a session this replica serves (once)."""
        if session_id not in self._namespace_of:
            self._namespace_of[session_id] = namespace
            self._held[namespace] += 1

    def close(self, session_id: str) -> None:
        """This replica no longer holds the session (no-op when it was not counted)."""
        namespace = self._namespace_of.pop(session_id, None)
        if namespace is not None:
            self._held[namespace] -= 1
            if self._held[namespace] <= 0:
                del self._held[namespace]
