"""Failed authentications rate limited per source (client address), in this process.

A source that presented ``limit`` refused credentials within ``window`` seconds is answered 429
``RATE_LIMITED`` (with ``Retry-After``) before any credential it sends is looked at, until its
oldest failure in the window is older than the window: at most ``limit`` guesses per window, and no
answer tells it whether a guess was right meanwhile. A success does not clear a source's failures
(a valid low-privilege key would otherwise reset the count between guesses). Other sources are not
affected. A request without credentials is not a failure (nothing was guessed).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from toolmesh.errors import RateLimited

MAX_SOURCES = 10_000
"""Sources tracked before those whose failures all left the window are forgotten."""


class AuthFailures:
    """Recent failed authentications by source; ``limit`` 0 turns the limit off."""

    def __init__(self, limit: int, window: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._limit = limit
        self._window = window
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}

    def check(self, source: str | None) -> None:
        """``RateLimited`` while ``source`` has ``limit`` failures in the window."""
        failures = self._failures.get(source) if source is not None and self._limit > 0 else None
        if failures is None or len(failures) < self._limit:
            return
        wait = failures[0] + self._window - self._clock()
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            raise RateLimited(
                f"Too many failed authentications from this address; retry in {seconds} s",
                {"retry_after_seconds": seconds},
            )

    def failed(self, source: str | None) -> None:
        """Count one refused credential from ``source``."""
        if source is None or self._limit <= 0:
            return
        now = self._clock()
        if source not in self._failures and len(self._failures) >= MAX_SOURCES:
            self._forget_old(now)
        failures = self._failures.setdefault(source, deque(maxlen=self._limit))
        failures.append(now)

    def _forget_old(self, now: float) -> None:
        for source in [s for s, f in self._failures.items() if not f or f[-1] + self._window <= now]:
            del self._failures[source]
        if len(self._failures) >= MAX_SOURCES:  # every tracked source failed recently: drop the oldest
            del self._failures[next(iter(self._failures))]
