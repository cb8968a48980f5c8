"""Durable quotas on the tool-call path: count a call against every quota that applies, refuse it
past one.

Each gateway replica holds every quota in memory (``QuotaBook``), reloaded from Postgres every
``TOOLMESH_QUOTA_REFRESH_SECONDS`` and at once by the replica that changes one, so the hot path reads
no database and a call with no quota costs three dictionary lookups. A call with quotas adds one to
each of their current windows' counters at once (one JetStream round trip, ``QuotaCounters``); when a
total passes its limit, the call is refused (429 ``RATE_LIMITED`` naming the quota) and its additions
are taken back, so a refused call counts nowhere. An admitted call counts whatever its outcome
(an upstream error or a timeout too: it was attempted). When JetStream cannot be reached, a call under
a quota is refused (503 ``BACKEND_UNAVAILABLE``): a quota never lets more calls through than its limit.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from toolmesh.contracts.quotas import QuotaScope, QuotaWindow, quota_subject
from toolmesh.errors import QuotaExceeded, ToolmeshError
from toolmesh.platform.store.connections import Db
from toolmesh.platform.store.queries import Row
from toolmesh.platform.supervision import supervise, wait_event
from toolmesh_gateway.quota_book import Limit, Quota, QuotaBook, limits_of, period
from toolmesh_gateway.quota_counters import QuotaCounters
from toolmesh_gateway.quota_store import list_quotas

log = logging.getLogger("toolmesh.gateway.quotas")


@dataclass(frozen=True)
class Standing:
    """Where an admitted call leaves the tightest of its quotas (the fewest calls left)."""

    limit: int
    remaining: int
    reset_epoch: int

    def headers(self) -> dict[str, str]:
        """``X-RateLimit-Limit``, ``-Remaining`` and ``-Reset`` (Unix seconds) of that quota."""
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_epoch),
        }


def quota_from_row(r: Row) -> Quota:
    """The ``Quota`` of a row of ``mcp.quotas``."""
    return Quota(
        id=r["id"],
        namespace=r["namespace"],
        scope=QuotaScope(r["scope"]),
        target=r["target"],
        per_minute=r["per_minute"],
        per_day=r["per_day"],
        per_month=r["per_month"],
    )


class QuotaMeter:
    """The quotas this replica enforces, and the counters they count in."""

    def __init__(self, db: Db, counters: QuotaCounters, refresh_seconds: float) -> None:
        self._db = db
        self.counters = counters
        self._refresh_seconds = refresh_seconds
        self._book = QuotaBook()
        self._stop = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load the quotas, then keep reloading them in the background."""
        await self.reload()
        self._runner = asyncio.create_task(supervise("quota-refresh", self._follow, self._stop), name="quota-refresh")

    async def close(self) -> None:
        """Stop reloading."""
        self._stop.set()
        if self._runner is not None:
            await self._runner

    async def reload(self) -> None:
        """Read every quota from Postgres."""
        self._book = QuotaBook(quota_from_row(row) for row in await list_quotas(self._db, None))

    async def _follow(self) -> None:
        while not await wait_event(self._stop, self._refresh_seconds):
            await self.reload()

    async def admit(self, key: tuple[str, str], namespace: str, server_name: str) -> Standing | None:
        """Count one call by ``key`` (namespace, name) to ``server_name`` of ``namespace``; where it
        leaves the tightest quota, None when no quota applies.

        Raises:
            QuotaExceeded: a quota has no calls left in its current window (nothing was counted).
            BackendUnavailable: the counts could not be reached.
        """
        quotas = self._book.applicable(key, namespace, server_name)
        if not quotas:
            return None
        now = datetime.now(UTC)
        limits = limits_of(quotas, now)
        subjects = [_subject(limit) for limit in limits]
        totals = await self.counters.add(subjects, 1)
        over = [limit for limit, total in zip(limits, totals, strict=True) if total > limit.limit]
        if over:
            await self._take_back(subjects)
            raise _exceeded(max(over, key=lambda limit: limit.period.resets_at), now)
        left, tightest = min(
            ((limit.limit - total, limit) for limit, total in zip(limits, totals, strict=True)),
            key=lambda pair: (pair[0], pair[1].period.resets_at),
        )
        return Standing(tightest.limit, left, int(tightest.period.resets_at.timestamp()))

    async def usage(self, quota: Quota) -> dict[QuotaWindow, int]:
        """The calls counted in the current window of each of ``quota``'s limits."""
        now = datetime.now(UTC)
        windows = [window for window, _ in quota.limits()]
        counts = await asyncio.gather(
            *(self.counters.read(w, quota_subject(w, period(w, now).label, quota.counter)) for w in windows)
        )
        return dict(zip(windows, counts, strict=True))

    async def _take_back(self, subjects: list[str]) -> None:
        try:
            await self.counters.add(subjects, -1)
        except ToolmeshError as exc:  # the refused call stays counted: never more calls than a limit
            log.warning("could not take back the counts of a refused call: %s", exc)


def _subject(limit: Limit) -> str:
    return quota_subject(limit.window, limit.period.label, limit.quota.counter)


def _exceeded(limit: Limit, now: datetime) -> QuotaExceeded:
    quota, wait = limit.quota, limit.period.seconds_left(now)
    where = "" if quota.scope is QuotaScope.NAMESPACE else f" (namespace '{quota.namespace}')"
    return QuotaExceeded(
        f"Quota exceeded: {limit.limit} tool calls per {limit.window} of {quota.scope} '{quota.target}'{where}; "
        f"resets at {limit.period.resets_at.isoformat()}, retry in {wait} s",
        {
            "retry_after_seconds": wait,
            "quota_id": quota.id,
            "scope": str(quota.scope),
            "target": quota.target,
            "namespace": quota.namespace,
            "window": str(limit.window),
            "limit": limit.limit,
            "reset_at": limit.period.resets_at.isoformat(),
            "reset_epoch": int(limit.period.resets_at.timestamp()),
        },
    )
