"""What every role's admission control shares: the call's deadline on the bus, and the log of shedding.

The gateway puts the absolute deadline of a call (wall-clock seconds since the epoch, from its
``timeout_seconds``) in the ``Toolmesh-Deadline`` header of the request it routes; a receiver that
finds it passed drops the request unexecuted: its caller has given up. Clocks of the hosts must
agree to well under a timeout (NTP), as they must for leases.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from toolmesh.platform.metrics import record_shed

DEADLINE_HEADER = "Toolmesh-Deadline"
QUIET_SECONDS = 10.0
"""Shedding is said to have stopped once nothing was refused for this long."""


def deadline_headers(timeout: float, clock: Callable[[], float] = time.time) -> dict[str, str]:
    """The header naming the deadline of a call that may run for ``timeout`` seconds from now."""
    return {DEADLINE_HEADER: f"{clock() + timeout:.3f}"}


def deadline_passed(headers: Mapping[str, str] | None, clock: Callable[[], float] = time.time) -> bool:
    """Whether a request's ``Toolmesh-Deadline`` (when it has a readable one) lies in the past."""
    value = (headers or {}).get(DEADLINE_HEADER)
    try:
        return value is not None and float(value) < clock()
    except ValueError:
        return False


class SheddingLog:
    """Counts refusals of one role by reason and says once when shedding starts and once when it
    stops (not per call)."""

    def __init__(self, role: str, log: logging.Logger, clock: Callable[[], float] = time.monotonic) -> None:
        self._role = role
        self._log = log
        self._clock = clock
        self._since: float | None = None
        self._last = 0.0
        self._refused = 0

    def shed(self, reason: str, detail: str) -> None:
        """One call was refused for ``reason`` (``detail`` says what was full)."""
        record_shed(self._role, reason)
        self._last = self._clock()
        self._refused += 1
        if self._since is None:
            self._since = self._last
            self._log.warning("%s is shedding load: %s", self._role, detail, extra={"reason": reason})

    def admitted(self) -> None:
        """One call was admitted: when nothing was refused for ``QUIET_SECONDS``, shedding stopped."""
        if self._since is not None and self._clock() - self._last >= QUIET_SECONDS:
            self._log.warning(
                "%s stopped shedding load: %d calls refused in %.0fs",
                self._role,
                self._refused,
                self._last - self._since,
            )
            self._since, self._refused = None, 0
