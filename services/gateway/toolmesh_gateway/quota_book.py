"""Which quotas apply to a call, and the windows they count in: plain code, no I/O.

Windows are fixed calendar windows of UTC time: the minute, the day, the month. A window's count
starts at zero when it begins (no sliding), so a caller may spend a window's limit at its end and the
next window's at its start.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from toolmesh.contracts.quotas import QuotaScope, QuotaWindow, counted


@dataclass(frozen=True)
class Quota:
    """One quota as the gateway enforces it."""

    id: str
    namespace: str
    scope: QuotaScope
    target: str
    per_minute: int | None
    per_day: int | None
    per_month: int | None

    @property
    def counter(self) -> str:
        """What its counts belong to: its namespace, scope and target, whichever quota limits them."""
        return counted(self.namespace, self.scope, self.target)

    def limits(self) -> list[tuple[QuotaWindow, int]]:
        """Its windows with a limit, each with the limit."""
        pairs = (
            (QuotaWindow.MINUTE, self.per_minute),
            (QuotaWindow.DAY, self.per_day),
            (QuotaWindow.MONTH, self.per_month),
        )
        return [(window, limit) for window, limit in pairs if limit is not None]


@dataclass(frozen=True)
class Period:
    """The current window of one kind: its label (part of the counter's subject) and when it ends."""

    label: str
    resets_at: datetime

    def seconds_left(self, now: datetime) -> int:
        """Whole seconds until the window ends (at least 1)."""
        return max(1, math.ceil((self.resets_at - now).total_seconds()))


def period(window: QuotaWindow, now: datetime) -> Period:
    """The window of kind ``window`` that ``now`` (UTC) falls in."""
    now = now.astimezone(UTC)
    if window is QuotaWindow.MINUTE:
        start = now.replace(second=0, microsecond=0)
        return Period(start.strftime("%Y%m%d%H%M"), start + timedelta(minutes=1))
    if window is QuotaWindow.DAY:
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return Period(start.strftime("%Y%m%d"), start + timedelta(days=1))
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (
        start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    )
    return Period(start.strftime("%Y%m"), following)


@dataclass(frozen=True)
class Limit:
    """One counted limit of a call: a quota, one of its windows, the current period of that window."""

    quota: Quota
    window: QuotaWindow
    limit: int
    period: Period


class QuotaBook:
    """Every quota, indexed by what it counts, so that finding a call's quotas is three lookups."""

    def __init__(self, quotas: Iterable[Quota] = ()) -> None:
        self._by_target = {(q.namespace, q.scope, q.target): q for q in quotas}

    def __len__(self) -> int:
        return len(self._by_target)

    def applicable(self, key: tuple[str, str], namespace: str, server_name: str) -> list[Quota]:
        """The quotas a call by ``key`` (its namespace and name) to server ``server_name`` of
        ``namespace`` counts against."""
        if not self._by_target:
            return []
        wanted = (
            (key[0], QuotaScope.KEY, key[1]),
            (namespace, QuotaScope.NAMESPACE, namespace),
            (namespace, QuotaScope.SERVER, server_name),
        )
        return [q for q in map(self._by_target.get, wanted) if q is not None]


def limits_of(quotas: Iterable[Quota], now: datetime) -> list[Limit]:
    """Every limit of ``quotas`` in the windows ``now`` falls in."""
    periods: dict[QuotaWindow, Period] = {}
    found = []
    for quota in quotas:
        for window, limit in quota.limits():
            current = periods.get(window) or periods.setdefault(window, period(window, now))
            found.append(Limit(quota, window, limit, current))
    return found
