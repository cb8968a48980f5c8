"""Ownership leases in the ``toolmesh_leases`` KV bucket: create wins, renew keeps, TTL frees."""

from __future__ import annotations

from nats.js.errors import BadRequestError, KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code when a conditional write finds another revision (a delete is not translated)."""


class LeaseTable:
    """The leases one process holds, by key, with the revision needed to renew each."""

    def __init__(self, kv: KeyValue, holder: str) -> None:
        self._kv = kv
        self.holder = holder
        self._revisions: dict[str, int] = {}

    def held(self) -> list[str]:
        """Keys this process believes it holds."""
        return list(self._revisions)

    async def claim(self, key: str) -> bool:
        """Atomically take ``key`` if nobody holds it; True when we now hold it."""
        if key in self._revisions:
            return True
        try:
            self._revisions[key] = await self._kv.create(key, self.holder.encode())
        except KeyWrongLastSequenceError:
            return False
        return True

    async def renew(self, key: str) -> bool:
        """Extend our lease; False (and forgotten) when it expired or someone else took it, or when
        it was released while the renewal was in flight (the renewed revision is given back too)."""
        revision = self._revisions.get(key)
        if revision is None:
            return False
        try:
            renewed = await self._kv.update(key, self.holder.encode(), last=revision)
        except (KeyWrongLastSequenceError, NotFoundError):
            if self._revisions.get(key) == revision:
                del self._revisions[key]
            return False
        if self._revisions.get(key) != revision:
            # Released meanwhile: its conditional delete met this newer revision and left it.
            await self._delete(key, renewed)
            return False
        self._revisions[key] = renewed
        return True

    async def release(self, key: str) -> None:
        """Give a lease back so another process can claim it at once."""
        revision = self._revisions.pop(key, None)
        if revision is not None:
            await self._delete(key, revision)

    async def _delete(self, key: str, revision: int) -> None:
        """Delete ``key`` if it is still at ``revision`` (ours); otherwise leave it."""
        try:
            await self._kv.delete(key, last=revision)
        except (KeyWrongLastSequenceError, NotFoundError):
            pass  # it had already expired or moved on: nothing of ours to give back
        except BadRequestError as exc:
            if exc.err_code != WRONG_LAST_SEQUENCE:
                raise

    async def holder_of(self, key: str) -> str | None:
        """Who holds ``key`` now, or None."""
        try:
            entry = await self._kv.get(key)
        except (KeyNotFoundError, NotFoundError):
            return None
        return entry.value.decode() if entry.value else None
