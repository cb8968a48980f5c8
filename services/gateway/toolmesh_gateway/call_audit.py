"""The audit trail of tool calls, kept off the hot path: records are batched per namespace and
published as ``audit.calls`` events (the projector writes them to the audit log).

A call only appends to a list; a background loop publishes what gathered every second (or at once
when a batch is full), and ``close()`` publishes the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from nats.js import JetStreamContext

from toolmesh.bus.publishing import publish_event
from toolmesh.contracts.events import CallRecord, CallsRecorded

log = logging.getLogger("toolmesh.gateway.audit")
FLUSH_SECONDS = 1.0
MAX_BATCH = 200
MAX_PENDING = 100_000
"""Records kept while JetStream is unreachable; beyond that the oldest are dropped (and logged)."""


class CallAudit:
    """Collects call records and publishes them in batches."""

    def __init__(self, js: JetStreamContext, *, flush_seconds: float = FLUSH_SECONDS) -> None:
        self._js = js
        self._flush_seconds = flush_seconds
        self._pending: dict[str, list[CallRecord]] = defaultdict(list)
        self._count = 0
        self._wake = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None

    def record(self, namespace: str, call: CallRecord) -> None:
        """Remember one call (no I/O)."""
        if self._count >= MAX_PENDING:
            log.error("audit backlog full: dropping the oldest call record of %s", namespace)
            oldest = max(self._pending, key=lambda n: len(self._pending[n]))
            self._pending[oldest].pop(0)
            self._count -= 1
        self._pending[namespace].append(call)
        self._count += 1
        if len(self._pending[namespace]) >= MAX_BATCH:
            self._wake.set()

    def start(self) -> None:
        """Start the publishing loop."""
        self._runner = asyncio.create_task(self._run(), name="call-audit")

    async def close(self) -> None:
        """Stop the loop and publish what is left."""
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        while self._count:  # calls still ending add records while it publishes
            left = self._count
            await self.flush()
            if self._count >= left:  # JetStream unreachable: nothing more to do
                return

    async def flush(self) -> None:
        """Publish the records gathered so far, a batch per namespace (kept for the next try on failure).

        Records that arrive while it publishes wait for the next round: under steady calls, a flush
        that also took those would publish one small batch per JetStream round trip, not per second.
        """
        gathered = {namespace: len(calls) for namespace, calls in self._pending.items()}
        for namespace, count in gathered.items():
            while count:
                batch = self._pending[namespace][: min(count, MAX_BATCH)]
                try:
                    await publish_event(self._js, CallsRecorded(namespace=namespace, calls=batch))
                except Exception as exc:  # JetStream unreachable: keep the records, try again next round
                    log.warning("audit records not published yet (%d waiting): %s", self._count, exc)
                    return
                del self._pending[namespace][: len(batch)]
                self._count -= len(batch)
                count -= len(batch)
            if not self._pending[namespace]:
                del self._pending[namespace]

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self._flush_seconds)
            except TimeoutError:
                pass
            self._wake.clear()
            await self.flush()
