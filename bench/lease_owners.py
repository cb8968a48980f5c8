"""Which process holds each server's lease while a run goes on, and every change of holder, as the
leases bucket's watch shows them (a renewal by the same holder is none). No imports of the other bench
modules: tests import it as ``bench.lease_owners``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from nats.errors import TimeoutError as NatsTimeout
from nats.js.kv import KeyValue

from toolmesh.platform.bus.leases import lease_holder


@dataclass
class OwnerWatch:
    """Lease holders per server (empty: none) and every change of holder: (server, before, after)."""

    holders: dict[str, str] = field(default_factory=dict)
    changes: list[tuple[str, str, str]] = field(default_factory=list)

    @contextlib.asynccontextmanager
    async def watching(self, leases: KeyValue) -> AsyncIterator[OwnerWatch]:
        """Follow ``leases`` (the leases bucket) until the block ends."""
        updates = await leases.watchall()
        stop = asyncio.Event()

        async def follow() -> None:
            while not stop.is_set():
                try:
                    entry = await updates.updates(timeout=0.5)
                except NatsTimeout:
                    continue
                if entry is None:  # the end of the initial values
                    continue
                holder = "" if entry.operation in ("DEL", "PURGE") else lease_holder(entry.value) or ""
                before = self.holders.get(entry.key)
                if before is not None and holder != before:
                    self.changes.append((entry.key, before, holder))
                self.holders[entry.key] = holder

        task = asyncio.create_task(follow())
        try:
            yield self
        finally:
            stop.set()
            await task
            await updates.stop()
