"""Per-principal rate limit: a token bucket per key (``TOOLMESH_RATE_LIMIT_*``), in this process.

Each gateway replica keeps its own buckets, so a principal spread over N replicas by a load
balancer gets up to N times the rate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from toolmesh.errors import RateLimited

MAX_BUCKETS = 10_000
"""Buckets kept before full (idle) ones are dropped; a dropped bucket comes back full anyway."""


class RateLimiter:
    """``rate`` requests per second on average, bursts of up to ``burst``; ``rate`` 0 disables it."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = float(max(burst, 1))
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    def check(self, key: str) -> None:
        """Take one token from ``key``'s bucket; ``RateLimited`` (with the wait) when it is empty."""
        if self._rate <= 0:
            return
        now = self._clock()
        tokens = self._tokens(key, now)
        if tokens < 1.0:
            wait = max(1, math.ceil((1.0 - tokens) / self._rate))
            raise RateLimited(
                f"Rate limit exceeded: {self._rate:g} requests/s (burst {self._burst:g}); retry in {wait} s",
                {"retry_after_seconds": wait},
            )
        if key not in self._buckets and len(self._buckets) >= MAX_BUCKETS:
            self._drop_full(now)
        self._buckets[key] = (tokens - 1.0, now)

    def _tokens(self, key: str, now: float) -> float:
        tokens, at = self._buckets.get(key, (self._burst, now))
        return min(self._burst, tokens + (now - at) * self._rate)

    def _drop_full(self, now: float) -> None:
        for key in [k for k in self._buckets if self._tokens(k, now) >= self._burst]:
            del self._buckets[key]
