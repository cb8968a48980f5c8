"""The audit trail of tool calls, kept off the hot path: records are batched per namespace and
published as ``audit.calls`` events (the projector writes them to the audit log).

A call only appends to a list; a background loop publishes what gathered every second (or at once
when a batch is full), and ``close()`` publishes the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict, deque

from nats.js import JetStreamContext

from toolmesh.contracts.namespace_events import CallRecord, CallsRecorded
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.supervision import wait_event

log = logging.getLogger("toolmesh.gateway.audit")
FLUSH_SECONDS = 1.0
MAX_BATCH = 200
MAX_PENDING = 100_000
"""Records kept while JetStream is unreachable; beyond that the oldest are dropped (and logged)."""


class CallAudit:
    """Collects call records and publishes them in batches."""

    def __init__(
        self, js: JetStreamContext, *, flush_seconds: float = FLUSH_SECONDS, max_pending: int = MAX_PENDING
    ) -> None:
        self._js = js
        self._flush_seconds = flush_seconds
        self._max_pending = max_pending
        self._pending: dict[str, list[CallRecord]] = defaultdict(list)  # not in a batch yet
        self._unsent: deque[CallsRecorded] = deque()  # batches made, not acknowledged yet
        self._in_flight: CallsRecorded | None = None
        self._count = 0  # records pending or unsent
        self._wake = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._closing = False  # the loop ends on it even when a library drops the cancel (nats-py on 3.11)

    def record(self, namespace: str, call: CallRecord) -> None:
        """Remember one call (no I/O)."""
        if self._count >= self._max_pending:
            self._drop_oldest()
        self._pending[namespace].append(call)
        self._count += 1
        if len(self._pending[namespace]) >= MAX_BATCH:
            self._wake.set()

    def _drop_oldest(self) -> None:
        """Make room: the oldest record not in a batch yet, else the oldest batch not being published."""
        if self._pending:
            namespace = max(self._pending, key=lambda n: len(self._pending[n]))
            log.error("audit backlog full: dropping the oldest call record of %s", namespace)
            self._pending[namespace].pop(0)
            if not self._pending[namespace]:
                del self._pending[namespace]
            self._count -= 1
            return
        for batch in self._unsent:
            if batch is not self._in_flight:
                log.error("audit backlog full: dropping %d call records of %s", len(batch.calls), batch.namespace)
                self._unsent.remove(batch)
                self._count -= len(batch.calls)
                return

    def start(self) -> None:
        """Start the publishing loop."""
        self._runner = asyncio.create_task(self._run(), name="call-audit")

    async def close(self) -> None:
        """Stop the loop and publish what is left."""
        if self._runner is not None:
            self._closing = True
            self._wake.set()
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        while self._count:  # calls still ending add records while it publishes
            left = self._count
            await self.flush()
            if self._count >= left:  # JetStream unreachable: nothing more to do
                return

    async def flush(self) -> None:
        """Publish the records gathered so far, a batch per namespace; a batch that fails (or whose
        publishing was cancelled) is retried as the same event, so JetStream keeps it once.

        Records that arrive while it publishes wait for the next round: under steady calls, a flush
        that also took those would publish one small batch per JetStream round trip, not per second.
        """
        for namespace, calls in self._pending.items():
            self._unsent.extend(
                CallsRecorded(namespace=namespace, calls=calls[start : start + MAX_BATCH])
                for start in range(0, len(calls), MAX_BATCH)
            )
        self._pending.clear()
        while self._unsent:
            batch = self._in_flight = self._unsent[0]
            try:
                await publish_event(self._js, batch)
            except Exception as exc:  # JetStream unreachable: keep the batch, try again next round
                log.warning("audit records not published yet (%d waiting): %s", self._count, exc)
                return
            finally:
                self._in_flight = None
            self._unsent.popleft()
            self._count -= len(batch.calls)

    async def _run(self) -> None:
        while not self._closing:
            await wait_event(self._wake, self._flush_seconds)
            self._wake.clear()
            await self.flush()
