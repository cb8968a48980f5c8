"""How many calls a role can run at once right now: a limit that follows its event loop's lag.

A role's configured bound (``TOOLMESH_GATEWAY_MAX_INFLIGHT_CALLS``, ``TOOLMESH_WORKER_MAX_INFLIGHT_CALLS``)
is a ceiling, not its capacity: how much a process can finish in time depends on its CPU, what else
runs on the host and what the calls cost. So the limit adapts, at most every ``ADJUST_SECONDS``: while
the loop runs later than ``TOOLMESH_SHED_LOOP_LAG_MS`` on average (``loop_lag``) it shrinks by
``DECREASE`` each period (never under ``FLOOR``); while the loop runs on time (under half that) it grows
by ``INCREASE`` of itself (at least one) each period back toward the ceiling.
A call that finds the limit taken is refused at once (503 ``OVERLOADED``, reason ``busy``): the work
admitted stays what the process can finish, so admitted calls keep their latency and refusals stay
cheap, rather than every call slowing down together.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from toolmesh.platform.loop_lag import LoopLag
from toolmesh.platform.metrics import watch_capacity

ADJUST_SECONDS = 0.1
DECREASE = 0.9
INCREASE = 0.1
FLOOR = 4


class Capacity:
    """The adaptive limit of one role in this process."""

    def __init__(
        self, role: str, ceiling: int, shed_at_ms: float, lag: LoopLag, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ceiling = ceiling
        self._lag = lag
        self.limit = ceiling
        self._shed_at = shed_at_ms / 1000
        self._clock = clock
        self._adjusted = clock()
        watch_capacity(role, lambda: self.limit)

    def admits(self, in_flight: int) -> bool:
        """Whether one more call may start with ``in_flight`` running (the limit adjusted first, when due)."""
        if self._shed_at > 0:
            steps = int((self._clock() - self._adjusted) / ADJUST_SECONDS)
            if steps:
                self._adjusted = self._clock()
                self.adjust(self._lag.seconds, steps)
        return in_flight < self.limit

    def adjust(self, lag_seconds: float, steps: int = 1) -> None:
        """Move the limit for a loop running ``lag_seconds`` late, ``steps`` adjustment periods after the last
        move: one step per period, down while late, up while on time (a quiet spell restores it)."""
        steps = min(steps, 100)
        if lag_seconds > self._shed_at:
            self.limit = max(min(FLOOR, self.ceiling), int(self.limit * DECREASE**steps))
        elif lag_seconds < self._shed_at / 2:
            grown = self.limit * (1 + INCREASE) ** steps
            self.limit = min(self.ceiling, max(self.limit + 1, int(grown)))
