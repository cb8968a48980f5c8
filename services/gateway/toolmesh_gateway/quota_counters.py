"""Quota counts in JetStream: one distributed counter (NATS 2.12+, ``Nats-Incr``) per quota and
window period, in the window's stream (``QUOTA_STREAMS``). Adding to a counter is one publish whose
acknowledgement carries the new total, atomic across every gateway replica; the counts are in file
storage, so they outlive every replica. NATS errors become ``BackendUnavailable`` here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext

from toolmesh.contracts.quotas import QUOTA_STREAMS, QuotaWindow
from toolmesh.errors import BackendUnavailable

COUNTER_TIMEOUT_SECONDS = 2.0
"""How long one counter operation may take before the call is refused (503)."""


class QuotaCounters:
    """The counters of the quota streams."""

    def __init__(self, js: JetStreamContext, timeout: float = COUNTER_TIMEOUT_SECONDS) -> None:
        self._js = js
        self._timeout = timeout

    async def add(self, subjects: Sequence[str], amount: int) -> list[int]:
        """Add ``amount`` (may be negative) to each counter at once; their new totals, in order."""
        try:
            acks = await asyncio.gather(*(self._add(subject, amount) for subject in subjects))
        except (TimeoutError, nats.errors.Error, nats.js.errors.Error) as exc:
            raise BackendUnavailable(
                "Quota counts could not be reached (JetStream); calls under a quota are refused until they can",
                {"reason": "quota_counts_unreachable"},
            ) from exc
        return acks

    async def _add(self, subject: str, amount: int) -> int:
        ack = await self._js.publish(subject, b"", timeout=self._timeout, headers={"Nats-Incr": f"{amount:+d}"})
        return int(ack.val or 0)

    async def read(self, window: QuotaWindow, subject: str) -> int:
        """A counter's total now (0 when it has none yet)."""
        stream = QUOTA_STREAMS[window][0]
        try:
            msg = await self._js.get_last_msg(stream, subject, direct=True)
        except nats.js.errors.NotFoundError:
            return 0
        except (TimeoutError, nats.errors.Error, nats.js.errors.Error) as exc:
            raise BackendUnavailable(
                "Quota counts could not be read (JetStream)", {"reason": "quota_counts_unreachable"}
            ) from exc
        return int(json.loads(msg.data or b"{}").get("val", 0))
