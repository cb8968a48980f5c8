"""Ownership leases in the ``toolmesh_leases`` KV bucket: create wins, renew keeps, TTL frees.

Each held lease carries a fencing token, the KV revision of its claim: revisions are the sequence
numbers of the bucket's stream, so a later claim of the same key (possible only once the earlier one
expired or was released) always has a higher token, and the token stays the same while its holder
renews (a reply stamped before a renewal never looks older than one stamped after it). The entry's
value names the holder and the token (``holder``, newline, token; a claim writes the holder and a
newline alone, its token being its own revision), so anyone reading the bucket can tell the token of
the lease in force (``lease_in_force``) although the bucket keeps only the latest revision of a key. A
value without the newline was written by an earlier version, which did not record the token.

The table also remembers, on the monotonic clock, when each lease was last known to be extended: the
moment the successful claim or renewal was *sent* (the bucket restarted the TTL no earlier than that),
so ``age`` never underestimates how long the lease has left. Renewals may run on another thread than
claims and releases (the session-worker's renewer has a thread and a connection of its own): the
table's bookkeeping is guarded by a lock.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from nats.js.errors import BadRequestError, KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code when a conditional write finds another revision (a delete is not translated)."""


@dataclass(frozen=True)
class Lease:
    """A lease in force: who holds it and its fencing token (None: written by an earlier version)."""

    holder: str
    token: int | None


def lease_holder(value: bytes | None) -> str | None:
    """The holder named by a lease entry's value (None for an empty one)."""
    return value.decode().partition("\n")[0] if value else None


async def lease_in_force(kv: KeyValue, key: str) -> Lease | None:
    """The lease in force on ``key``, None when nobody holds it."""
    try:
        entry = await kv.get(key)
    except (KeyNotFoundError, NotFoundError):
        return None
    if not entry.value:
        return None
    holder, newline, token = entry.value.decode().partition("\n")
    if not newline:  # an earlier version's value: no token recorded
        return Lease(holder, None)
    if not token:  # the claim itself
        return Lease(holder, entry.revision)
    return Lease(holder, int(token) if token.isdigit() else None)


class LeaseTable:
    """The leases one process holds, by key, with the revision needed to renew each."""

    def __init__(self, kv: KeyValue, holder: str) -> None:
        self._kv = kv
        self.holder = holder
        self._revisions: dict[str, int] = {}
        self._tokens: dict[str, int] = {}
        self._extended: dict[str, float] = {}  # monotonic send time of the last successful claim/renew
        self._lock = threading.Lock()

    def held(self) -> list[str]:
        """Keys this process believes it holds."""
        with self._lock:
            return list(self._revisions)

    def token(self, key: str) -> int | None:
        """The fencing token of a held lease (its claim's revision), None when not held."""
        return self._tokens.get(key)

    def age(self, key: str) -> float | None:
        """Seconds since the lease was last known to be extended (None when not held)."""
        extended = self._extended.get(key)
        return None if extended is None else time.monotonic() - extended

    def older_than(self, seconds: float) -> list[str]:
        """Held keys last extended more than ``seconds`` ago."""
        now = time.monotonic()
        with self._lock:
            return [key for key, at in self._extended.items() if now - at > seconds]

    def oldest_age(self) -> float:
        """Age of the least recently extended lease held (0 when none is)."""
        with self._lock:
            return max((time.monotonic() - at for at in self._extended.values()), default=0.0)

    def forget(self, key: str) -> int | None:
        """Stop holding ``key`` without telling the bucket (it expires there); its revision, if held."""
        with self._lock:
            self._tokens.pop(key, None)
            self._extended.pop(key, None)
            return self._revisions.pop(key, None)

    async def claim(self, key: str) -> bool:
        """Atomically take ``key`` if nobody holds it; True when we now hold it."""
        if key in self._revisions:
            return True
        sent = time.monotonic()
        try:
            revision = await self._kv.create(key, f"{self.holder}\n".encode())
        except KeyWrongLastSequenceError:
            return False
        with self._lock:
            self._revisions[key] = self._tokens[key] = revision
            self._extended[key] = sent
        return True

    async def renew(self, key: str, kv: KeyValue | None = None) -> bool:
        """Extend our lease (through ``kv``, another connection's view of the bucket, if given); False
        (and forgotten) when it expired or someone else took it, or when it was released while the
        renewal was in flight (the renewed revision is given back too)."""
        revision, token = self._revisions.get(key), self._tokens.get(key)
        if revision is None or token is None:
            return False
        kv = kv or self._kv
        sent = time.monotonic()
        try:
            renewed = await kv.update(key, f"{self.holder}\n{token}".encode(), last=revision)
        except (KeyWrongLastSequenceError, NotFoundError):
            with self._lock:
                if self._revisions.get(key) == revision:
                    del self._revisions[key]
                    self._tokens.pop(key, None)
                    self._extended.pop(key, None)
            return False
        with self._lock:
            kept = self._revisions.get(key) == revision
            if kept:
                self._revisions[key] = renewed
                self._extended[key] = sent
        if not kept:
            # Released meanwhile: its conditional delete met this newer revision and left it.
            await self._delete(kv, key, renewed)
        return kept

    async def release(self, key: str) -> None:
        """Give a lease back so another process can claim it at once."""
        revision = self.forget(key)
        if revision is not None:
            await self._delete(self._kv, key, revision)

    async def give_back(self, key: str, revision: int) -> None:
        """Delete ``key`` from the bucket if it is still at ``revision`` (a lease already forgotten)."""
        await self._delete(self._kv, key, revision)

    @staticmethod
    async def _delete(kv: KeyValue, key: str, revision: int) -> None:
        """Delete ``key`` if it is still at ``revision`` (ours); otherwise leave it."""
        try:
            await kv.delete(key, last=revision)
        except (KeyWrongLastSequenceError, NotFoundError):
            pass  # it had already expired or moved on: nothing of ours to give back
        except BadRequestError as exc:
            if exc.err_code != WRONG_LAST_SEQUENCE:
                raise

    async def holder_of(self, key: str) -> str | None:
        """Who holds ``key`` now, or None."""
        lease = await lease_in_force(self._kv, key)
        return lease.holder if lease is not None else None
