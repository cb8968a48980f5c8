"""Quota windows and which quotas apply to a call (``quota_book``): plain code, no servers."""

from __future__ import annotations

from datetime import UTC, datetime

from toolmesh.contracts.quotas import QuotaScope, QuotaWindow
from toolmesh_gateway.quota_book import Quota, QuotaBook, limits_of, period


def quota(scope: QuotaScope, target: str, namespace: str = "team-a", **limits: int) -> Quota:
    return Quota(
        id=f"{scope}-{target}",
        namespace=namespace,
        scope=scope,
        target=target,
        per_minute=limits.get("per_minute"),
        per_day=limits.get("per_day"),
        per_month=limits.get("per_month"),
    )


def test_windows_are_fixed_utc_calendar_windows() -> None:
    now = datetime(2026, 12, 31, 23, 59, 30, 500, tzinfo=UTC)
    minute, day, month = (period(w, now) for w in (QuotaWindow.MINUTE, QuotaWindow.DAY, QuotaWindow.MONTH))
    assert (minute.label, minute.resets_at) == ("202612312359", datetime(2027, 1, 1, tzinfo=UTC))
    assert (day.label, day.resets_at) == ("20261231", datetime(2027, 1, 1, tzinfo=UTC))
    assert (month.label, month.resets_at) == ("202612", datetime(2027, 1, 1, tzinfo=UTC))
    assert minute.seconds_left(now) == 30
    assert period(QuotaWindow.MONTH, datetime(2026, 2, 10, tzinfo=UTC)).resets_at == datetime(2026, 3, 1, tzinfo=UTC)


def test_a_call_counts_against_its_keys_its_namespaces_and_its_servers_quotas_only() -> None:
    key = quota(QuotaScope.KEY, "bot", per_day=5)
    namespace = quota(QuotaScope.NAMESPACE, "team-a", per_month=100)
    server = quota(QuotaScope.SERVER, "github", per_minute=10)
    elsewhere = quota(QuotaScope.SERVER, "github", namespace="team-b", per_minute=1)
    book = QuotaBook([key, namespace, server, elsewhere, quota(QuotaScope.KEY, "other", per_day=1)])
    assert book.applicable(("team-a", "bot"), "team-a", "github") == [key, namespace, server]
    assert book.applicable(("team-a", "someone"), "team-a", "slack") == [namespace]
    assert book.applicable(("team-a", "bot"), "team-b", "github") == [key, elsewhere]  # a key quota follows the key
    assert QuotaBook().applicable(("team-a", "bot"), "team-a", "github") == []


def test_each_limit_of_a_quota_counts_in_its_own_window() -> None:
    now = datetime(2026, 11, 27, 10, 5, tzinfo=UTC)
    limits = limits_of([quota(QuotaScope.KEY, "bot", per_minute=2, per_month=9)], now)
    assert [(limit.window, limit.limit, limit.period.label) for limit in limits] == [
        (QuotaWindow.MINUTE, 2, "202611271005"),
        (QuotaWindow.MONTH, 9, "202611"),
    ]


def test_counts_belong_to_what_is_counted_not_to_the_quota() -> None:
    key = quota(QuotaScope.KEY, "ci.bot >*", per_day=5)
    again = Quota("another-id", "team-a", QuotaScope.KEY, "ci.bot >*", None, 9, None)
    assert key.counter == again.counter  # re-created or replaced: the same count
    others = {
        quota(QuotaScope.KEY, "nightly").counter,
        quota(QuotaScope.SERVER, "ci.bot >*").counter,
        quota(QuotaScope.KEY, "ci.bot >*", namespace="team-b").counter,
    }
    assert key.counter not in others and len(others) == 3
    assert all(c.isalnum() for c in key.counter)  # one subject token, whatever the target holds
