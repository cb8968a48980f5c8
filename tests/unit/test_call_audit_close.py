"""Closing the call audit ends its loop even when the cancel it sends is lost on the way.

nats-py waits for a JetStream acknowledgement with ``asyncio.wait_for``, which on Python 3.11 drops
a cancel that arrives together with the reply: the flush then returns normally, and a loop that only
a cancel could end went on flushing, so a stopping gateway never finished (seen twice in CI).
"""

from __future__ import annotations

import asyncio

import pytest

from toolmesh_gateway.call_audit import CallAudit

pytestmark = pytest.mark.unit


class CancelDroppingAudit(CallAudit):
    """A call audit whose publishing loses every cancel, as a reply that meets the cancel does."""

    def __init__(self) -> None:
        super().__init__(None, flush_seconds=0.01)  # type: ignore[arg-type]  # flush below never publishes
        self.flushing = asyncio.Event()

    async def flush(self) -> None:
        self.flushing.set()
        try:
            await asyncio.sleep(0.05)  # a JetStream request under way
        except asyncio.CancelledError:
            return  # the reply came with the cancel: the cancel is gone


async def test_close_ends_the_loop_when_the_cancel_is_lost() -> None:
    audit = CancelDroppingAudit()
    audit.start()
    await audit.flushing.wait()
    closing = asyncio.create_task(audit.close())
    done, _ = await asyncio.wait({closing}, timeout=10)  # a bound for the failure, not a speed target
    assert closing in done, "close() never ended: the loop went on after losing its cancel"
