"""MCP client sessions a gateway replica holds, counted per namespace (its fair share) and per key.

A session counts from the request that opens it (or from its adoption by this replica) until this
replica lets it go (ended, expired, or its opening request failed). Opening one more than the
namespace's ``max_mcp_sessions``, or than its key's ``key_max_mcp_sessions`` (a smaller share, so
one key cannot take every session of its namespace from the others), is refused with 409
``LIMIT_EXCEEDED``; adopting a session another replica opened is never refused (it already exists).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from toolmesh.errors import LimitExceeded
from toolmesh.metrics import record_limit_rejection
from toolmesh.quotas import NamespaceQuota

T = TypeVar("T")


class NamespaceSessions:
    """Which namespace and key each held session belongs to, and how many each of them holds."""

    def __init__(self, quota: Callable[[str], NamespaceQuota]) -> None:
        self._quota = quota
        self._owner_of: dict[str, tuple[str, str]] = {}  # session id -> (namespace, key id)
        self._held: Counter[str] = Counter()
        self._held_by_key: Counter[tuple[str, str]] = Counter()

    def held_by(self, namespace: str) -> int:
        """Sessions of ``namespace`` this replica holds."""
        return self._held[namespace]

    def open(self, session_id: str, namespace: str, key_id: str) -> None:
        """Count a session being opened; ``LimitExceeded`` when its namespace or its key holds all it may."""
        quota = self._quota(namespace)
        if self._held[namespace] >= quota.max_mcp_sessions:
            record_limit_rejection("namespace_mcp_sessions")
            raise LimitExceeded(
                f"MCP session limit of namespace '{namespace}' reached ({quota.max_mcp_sessions} on this gateway)",
                {"namespace": namespace, "namespace_max_mcp_sessions": quota.max_mcp_sessions},
            )
        if self._held_by_key[namespace, key_id] >= quota.key_max_mcp_sessions:
            record_limit_rejection("key_mcp_sessions")
            raise LimitExceeded(
                f"MCP session limit of this key reached ({quota.key_max_mcp_sessions} on this gateway)",
                {"namespace": namespace, "key_max_mcp_sessions": quota.key_max_mcp_sessions},
            )
        self.adopt(session_id, namespace, key_id)

    def adopt(self, session_id: str, namespace: str, key_id: str) -> None:
        """Count a session this replica serves (once)."""
        if session_id not in self._owner_of:
            self._owner_of[session_id] = (namespace, key_id)
            self._held[namespace] += 1
            self._held_by_key[namespace, key_id] += 1

    def close(self, session_id: str) -> None:
        """This replica no longer holds the session (no-op when it was not counted)."""
        owner = self._owner_of.pop(session_id, None)
        if owner is not None:
            _release(self._held, owner[0])
            _release(self._held_by_key, owner)


def _release(counter: Counter[T], counted: T) -> None:
    """One session fewer for ``counted`` (forgotten at none)."""
    counter[counted] -= 1
    if counter[counted] <= 0:
        del counter[counted]
