"""MCP client sessions a gateway replica holds, counted per namespace (its fair share) and per key.

A session counts from the request that opens it (or from its adoption by this replica) until this
replica lets it go (ended, expired, or its opening request failed). Opening one more than the
namespace's ``max_mcp_sessions`` is refused with 409 ``LIMIT_EXCEEDED``. A key holds at most its
``key_max_mcp_sessions`` (a smaller share, so one key cannot take every session of its namespace from
the others): past it, the key's least recently used idle session (no request in flight, no open GET
stream) makes way for the new one, and only a key whose every session is in use is refused. One
key's sessions never make way for another's. Adopting a session another replica opened is never
refused (it already exists).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from typing import TypeVar

from toolmesh.errors import LimitExceeded
from toolmesh.platform.metrics import record_limit_rejection
from toolmesh.quotas import NamespaceQuota

T = TypeVar("T")


class NamespaceSessions:
    """Which namespace and key each held session belongs to, and how many each of them holds."""

    def __init__(self, quota: Callable[[str], NamespaceQuota]) -> None:
        self._quota = quota
        self._owner_of: dict[str, tuple[str, str]] = {}  # session id -> (namespace, key id)
        self._held: Counter[str] = Counter()
        self._held_by_key: Counter[tuple[str, str]] = Counter()
        self._busy: Counter[str] = Counter()  # session id -> its requests and streams under way here
        self._uses = count()  # numbers the moments a session was last in use here, in order
        self._used_at: dict[str, int] = {}  # session id -> when it was last in use here

    def held_by(self, namespace: str) -> int:
        """Sessions of ``namespace`` this replica holds."""
        return self._held[namespace]

    def open(self, session_id: str, namespace: str, key_id: str) -> str | None:
        """Count a session being opened (in use until ``done``); the id of the key's session that makes
        way for it, if any (no longer counted: the caller ends it); ``LimitExceeded`` when its namespace
        holds all it may, or its key does and uses every one."""
        quota, owner = self._quota(namespace), (namespace, key_id)
        at_key_share = self._held_by_key[owner] >= quota.key_max_mcp_sessions
        evicted = self._least_recently_used_idle(owner) if at_key_share else None
        if evicted is not None:  # the key's own session makes way: the namespace holds no more than before
            self.close(evicted)
        elif self._held[namespace] >= quota.max_mcp_sessions:
            record_limit_rejection("namespace_mcp_sessions")
            raise LimitExceeded(
                f"MCP session limit of namespace '{namespace}' reached ({quota.max_mcp_sessions} on this gateway)",
                {"namespace": namespace, "namespace_max_mcp_sessions": quota.max_mcp_sessions},
            )
        elif at_key_share:
            record_limit_rejection("key_mcp_sessions")
            raise LimitExceeded(
                f"MCP session limit of this key reached ({quota.key_max_mcp_sessions} on this gateway)",
                {"namespace": namespace, "key_max_mcp_sessions": quota.key_max_mcp_sessions},
            )
        self.adopt(session_id, namespace, key_id)
        self._busy[session_id] += 1
        return evicted

    def done(self, session_id: str) -> None:
        """The request that opened the session (``open``) is over."""
        self._release_use(session_id)

    @contextmanager
    def in_use(self, session_id: str) -> Iterator[None]:
        """The session is not idle while this holds (a request or stream of it under way here)."""
        self._busy[session_id] += 1
        try:
            yield
        finally:
            self._release_use(session_id)

    def _release_use(self, session_id: str) -> None:
        _release(self._busy, session_id)
        if session_id in self._owner_of:
            self._used_at[session_id] = next(self._uses)

    def _least_recently_used_idle(self, owner: tuple[str, str]) -> str | None:
        idle = [s for s, o in self._owner_of.items() if o == owner and not self._busy[s]]
        return min(idle, key=lambda s: self._used_at.get(s, -1), default=None)

    def adopt(self, session_id: str, namespace: str, key_id: str) -> None:
        """Count a session this replica serves (once)."""
        if session_id not in self._owner_of:
            self._owner_of[session_id] = (namespace, key_id)
            self._held[namespace] += 1
            self._held_by_key[namespace, key_id] += 1
            self._used_at[session_id] = next(self._uses)

    def close(self, session_id: str) -> None:
        """This replica no longer holds the session (no-op when it was not counted)."""
        owner = self._owner_of.pop(session_id, None)
        self._used_at.pop(session_id, None)
        if owner is not None:
            _release(self._held, owner[0])
            _release(self._held_by_key, owner)


def _release(counter: Counter[T], counted: T) -> None:
    """One session fewer for ``counted`` (forgotten at none)."""
    counter[counted] -= 1
    if counter[counted] <= 0:
        del counter[counted]
