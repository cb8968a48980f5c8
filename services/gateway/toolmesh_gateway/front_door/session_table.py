"""MCP client sessions in the ``toolmesh_mcp_sessions`` KV bucket, and their end announced on the bus.

Every request of a session is checked against its record. A replica reads the record from the
bucket at most once per ``RECORD_TRUST_SECONDS`` and serves the requests in between from the copy
it read (``recent``): reading it for every request cost the ``/mcp`` path about a quarter of its
CPU (bench/routing.py). An end still reaches every replica at once: ``end`` announces it, and it
returns only once every copy read before the end has gone stale, so a request that arrives anywhere
after the client heard of the end finds no session.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nats.errors import Error as NatsError
from nats.js.errors import BadRequestError, KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue
from pydantic import ValidationError

from toolmesh.contracts.mcp_sessions import SESSION_ENDED_SUBJECT, McpSessionEnded, McpSessionRecord
from toolmesh.errors import BackendUnavailable
from toolmesh.platform.bus.interface import Bus, Message, Subscription
from toolmesh.platform.bus.leases import WRONG_LAST_SEQUENCE

V = TypeVar("V")

RECORD_TRUST_SECONDS = 0.1
"""How long a replica serves a session from the copy of its record it read (and how long ``end`` waits)."""
RECENT_RECORDS = 10_000
"""Copies (and ids of ended sessions) a replica keeps at most; the oldest go first."""


class McpSessionTable:
    """The sessions every gateway replica can serve, by ``mcp-session-id``."""

    def __init__(self, bus: Bus, kv: KeyValue, *, trust_seconds: float = RECORD_TRUST_SECONDS) -> None:
        self._bus = bus
        self._kv = kv
        self._trust_seconds = trust_seconds
        self._recent: OrderedDict[str, tuple[McpSessionRecord, float]] = OrderedDict()
        self._ended: OrderedDict[str, None] = OrderedDict()  # a read that began before the end must not keep a copy

    async def recent(self, session_id: str) -> McpSessionRecord | None:
        """The session's record as read at most ``trust_seconds`` ago (else read now), or None."""
        asked = time.monotonic()  # before the read: the copy is only as fresh as the read's start
        copy = self._recent.get(session_id)
        if copy is not None and asked - copy[1] < self._trust_seconds:
            return copy[0]
        record = None if session_id in self._ended else await self.get(session_id)
        if record is None or session_id in self._ended:  # ended while it was read
            self._recent.pop(session_id, None)
            return None
        _remember(self._recent, session_id, (record, asked))
        return record

    async def get(self, session_id: str) -> McpSessionRecord | None:
        """The session's record, or None when it ended, expired or never existed."""
        try:
            entry = await self._kv.get(session_id)
        except (KeyNotFoundError, NotFoundError):
            return None
        except NatsError as exc:
            raise BackendUnavailable(f"MCP session store unavailable: {exc}") from exc
        try:
            return McpSessionRecord.model_validate_json(entry.value or b"")
        except ValidationError:
            return None  # not a record of this version: as good as unknown

    async def put(self, session_id: str, record: McpSessionRecord) -> None:
        """Write the record of a session that opened."""
        try:
            await self._kv.put(session_id, record.model_dump_json().encode())
        except NatsError as exc:
            raise BackendUnavailable(f"MCP session store unavailable: {exc}") from exc

    async def touch(self, session_id: str) -> bool:
        """Restart the idle TTL of a session that still exists (never brings an ended one back)."""
        self._recent.pop(session_id, None)  # the next request reads the touched record
        try:
            entry = await self._kv.get(session_id)
            record = McpSessionRecord.model_validate_json(entry.value or b"")
            touched = record.model_copy(update={"touched_at": time.time()})
            await self._kv.update(session_id, touched.model_dump_json().encode(), last=entry.revision)
        except (KeyNotFoundError, NotFoundError, KeyWrongLastSequenceError, ValidationError):
            return False  # ended or rewritten meanwhile
        except BadRequestError as exc:
            if exc.err_code == WRONG_LAST_SEQUENCE:
                return False
            raise BackendUnavailable(f"MCP session store unavailable: {exc}") from exc
        except NatsError as exc:
            raise BackendUnavailable(f"MCP session store unavailable: {exc}") from exc
        return True

    async def end(self, session_id: str) -> None:
        """Forget the session and tell every replica to drop its copy; returns once no replica serves
        it (every copy read before the delete is older than ``trust_seconds``)."""
        self._ended_here(session_id)
        try:
            await self._kv.delete(session_id)
            ended = McpSessionEnded(session_id=session_id)
            await self._bus.publish(SESSION_ENDED_SUBJECT, ended.model_dump_json().encode())
        except NatsError as exc:
            raise BackendUnavailable(f"MCP session store unavailable: {exc}") from exc
        await asyncio.sleep(self._trust_seconds)  # a replica that missed the announcement reads again by then

    def _ended_here(self, session_id: str) -> None:
        """Drop the copy of an ended session, and keep any read still under way from making one."""
        self._recent.pop(session_id, None)
        _remember(self._ended, session_id, None)

    async def follow_ends(self, on_end: Callable[[str], Awaitable[None]]) -> Subscription:
        """Call ``on_end`` with the id of each session that ends on any replica (unsubscribe to stop)."""

        async def received(msg: Message) -> None:
            try:
                ended = McpSessionEnded.model_validate_json(msg.data)
            except ValidationError:
                return
            self._ended_here(ended.session_id)
            await on_end(ended.session_id)

        return await self._bus.subscribe(SESSION_ENDED_SUBJECT, received)


def _remember(items: OrderedDict[str, V], key: str, value: V) -> None:
    """Put ``key`` last in ``items``, dropping the oldest beyond ``RECENT_RECORDS``."""
    items[key] = value
    items.move_to_end(key)
    if len(items) > RECENT_RECORDS:
        items.popitem(last=False)
