"""How far behind its event loop runs: the overload signal every role sheds on.

A process that has more work than CPU shows it first in its event loop: callbacks wait longer and
longer for their turn, and every call admitted then only waits longer. A sampler per loop asks to
wake every ``SAMPLE_SECONDS`` and keeps an exponentially weighted mean of how late it woke (the lag);
``capacity`` lowers a role's limit on calls while it passes ``TOOLMESH_SHED_LOOP_LAG_MS``. Lag is the
process's own: it covers CPU starvation whatever the cause (call traffic, a host shared with other
processes) and does not depend on how long upstream tools take.
"""

from __future__ import annotations

import asyncio
import time

SAMPLE_SECONDS = 0.02
SMOOTHING = 0.3
"""Weight of the newest sample in the mean: a few samples (about 0.1 s) follow a change."""


class LoopLag:
    """The lag of one process's event loop, sampled while ``run`` runs (``runtime.open_backends`` runs it
    for as long as the process's backends are open)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    async def run(self) -> None:
        """Measure until cancelled."""
        while True:
            asked = time.monotonic()
            await asyncio.sleep(SAMPLE_SECONDS)
            late = max(0.0, time.monotonic() - asked - SAMPLE_SECONDS)
            self.seconds += SMOOTHING * (late - self.seconds)
