"""BR-006 health rules as plain data and functions: what one check means for a server.

No I/O here: the health-worker measures, these functions judge, and the owner of the session
applies the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolmesh.lifecycle import ServerStatus

DEGRADE_AFTER = 2
"""Consecutive counted failures that make a CONNECTED server DEGRADED."""
ERROR_AFTER = 3
"""Consecutive counted failures that make a server ERROR and schedule a reconnect."""
CHECKED = frozenset({ServerStatus.CONNECTED, ServerStatus.DEGRADED})
"""States whose servers are health-checked each interval."""


@dataclass(frozen=True)
class CheckOutcome:
    """What one probe found: healthy, or a failure that counts (or not, for a 4xx: a config issue)."""

    healthy: bool
    counted: bool = True
    response_time_ms: float | None = None
    error: str | None = None

    @classmethod
    def ok(cls, response_time_ms: float) -> CheckOutcome:
        return cls(healthy=True, response_time_ms=response_time_ms)

    @classmethod
    def failed(cls, error: str, response_time_ms: float | None = None) -> CheckOutcome:
        return cls(healthy=False, error=error, response_time_ms=response_time_ms)


@dataclass(frozen=True)
class Verdict:
    """What follows from one check: the new failure count, and a status change if any."""

    consecutive_failures: int
    status: ServerStatus | None = None
    history: str | None = None
    reconnect: bool = False
    warning: str | None = None


def judge_http_status(code: int, response_time_ms: float) -> CheckOutcome:
    """EC-005 and BR-006: only 200 is healthy; 4xx is a config warning that does not count; the rest counts."""
    if code == 200:
        return CheckOutcome.ok(response_time_ms)
    if 400 <= code < 500:
        return CheckOutcome(
            healthy=False,
            counted=False,
            response_time_ms=response_time_ms,
            error=f"Health check URL answered HTTP {code} (check the health_check_url configuration)",
        )
    return CheckOutcome.failed(f"Health check URL answered HTTP {code}", response_time_ms)


def decide(status: ServerStatus, failures: int, outcome: CheckOutcome) -> Verdict:
    """The BR-006 transition for a server in ``status`` with ``failures`` counted so far.

    Success resets the count and brings DEGRADED back to CONNECTED; an uncounted failure (4xx)
    changes nothing; counted failures warn at 1, degrade at 2, and at 3 or more make the server
    ERROR and ask for a reconnect.
    """
    if outcome.healthy:
        if status is ServerStatus.DEGRADED:
            return Verdict(0, ServerStatus.CONNECTED, "RECOVERED")
        return Verdict(0)
    if not outcome.counted:
        return Verdict(failures, warning=outcome.error)
    count = failures + 1
    if count >= ERROR_AFTER:
        return Verdict(count, ServerStatus.ERROR, "ERROR", reconnect=True)
    if count >= DEGRADE_AFTER and status is ServerStatus.CONNECTED:
        return Verdict(count, ServerStatus.DEGRADED, "DEGRADED")
    return Verdict(count, warning=outcome.error if count < DEGRADE_AFTER else None)


def current_window(now: float, interval: float) -> int:
    """The number of the interval ``now`` (epoch seconds) falls in: every scheduler agrees on it."""
    return int(now // interval)


def check_timeout(configured: float, interval: float) -> float:
    """The bound of one probe: the configured timeout (5 s), but under the interval.

    Two checks of one server must never overlap, or both would read the same failure count.
    """
    return min(configured, interval * 0.8)


def reconnect_delays(backoff: tuple[float, ...], attempts: int) -> list[float]:
    """EC-001: the pauses between reconnect attempts (1, 2, 4, 8 s for 5 attempts)."""
    if attempts <= 1:
        return []
    delays = list(backoff[: attempts - 1])
    while len(delays) < attempts - 1:
        delays.append(delays[-1] * 2 if delays else 1.0)
    return delays
