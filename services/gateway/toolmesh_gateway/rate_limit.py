"""Rate limits in this process: a token bucket per principal (``TOOLMESH_RATE_LIMIT_*``), and one
per namespace for its tool calls (``TOOLMESH_NAMESPACE_CALLS_*``, the namespace's fair share).

Each gateway replica keeps its own buckets, so a principal or namespace spread over N replicas by a
load balancer gets up to N times the rate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from toolmesh.errors import RateLimited
from toolmesh.platform.config import Settings

MAX_BUCKETS = 10_000
"""Buckets kept before full (idle) ones are dropped; a dropped bucket comes back full anyway."""


class RateLimiter:
    """``rate`` requests per second on average, bursts of up to ``burst``; ``rate`` 0 disables it."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = float(max(burst, 1))
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    @property
    def rate(self) -> float:
        """Requests per second on average (0: no limit)."""
        return self._rate

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


class NamespaceCallLimiter:
    """Tool calls per second of each namespace, at the rate and burst of its quota."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._clock = clock
        self._limiters: dict[str, RateLimiter] = {}

    def check(self, namespace: str) -> None:
        """Count one call of ``namespace``; ``RateLimited`` (with the wait) when its bucket is empty."""
        limiter = self._limiters.get(namespace)
        if limiter is None:
            quota = self._settings.namespace_quota(namespace)
            limiter = self._limiters[namespace] = RateLimiter(quota.calls_per_second, quota.calls_burst, self._clock)
        try:
            limiter.check(namespace)
        except RateLimited as exc:
            wait = exc.context["retry_after_seconds"]
            raise RateLimited(
                f"Tool calls of namespace '{namespace}' are over its limit of {limiter.rate:g}/s; retry in {wait} s",
                {"retry_after_seconds": wait, "namespace": namespace},
            ) from None
