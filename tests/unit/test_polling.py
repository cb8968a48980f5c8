"""``toolmesh.platform.polling``: the one poll-until helper (sync and async checks, retried errors, time-outs)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest

from toolmesh.platform.polling import poll_until, wait_until

pytestmark = pytest.mark.unit


@dataclass
class SimulatedClock:
    """A clock that only moves when the poller sleeps: the pauses it asked for, no real time."""

    now: float = 0.0
    pauses: list[float] = field(default_factory=list)

    def read(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


async def test_returns_the_first_truthy_value_of_a_sync_check() -> None:
    counter = itertools.count()
    assert await poll_until(lambda: next(counter) >= 3 and "done", 5, interval=0) == "done"
    assert next(counter) == 4  # checked exactly until it held


async def test_awaits_an_async_check() -> None:
    calls: list[int] = []

    async def check() -> list[int] | None:
        calls.append(1)
        return calls if len(calls) == 2 else None

    assert await poll_until(check, 5, interval=0) == [1, 1]


async def test_gives_the_last_falsy_value_after_the_timeout() -> None:
    clock, checks = SimulatedClock(), itertools.count(1)
    outcome = await poll_until(
        lambda: next(checks) and 0, 1.0, interval=0.25, clock=clock.read, sleep=clock.async_sleep
    )
    assert outcome == 0
    assert clock.pauses == [0.25] * 4  # checked at 0, 0.25, 0.5, 0.75 and 1.0: then the time was up
    assert next(checks) == 6


async def test_listed_errors_count_as_not_yet_and_others_propagate() -> None:
    attempts = itertools.count()

    def flaky() -> str:
        if next(attempts) < 2:
            raise ConnectionRefusedError("not yet")
        return "up"

    assert await poll_until(flaky, 5, interval=0, retry_on=(OSError,)) == "up"
    clock = SimulatedClock()
    outcome = await poll_until(
        _refused, 1, interval=0.5, retry_on=(OSError,), clock=clock.read, sleep=clock.async_sleep
    )
    assert outcome is None
    assert clock.pauses == [0.5, 0.5]
    with pytest.raises(ConnectionRefusedError):
        await poll_until(_refused, 5, interval=0)


def test_sync_wait_until_backs_off_up_to_the_cap() -> None:
    clock, checks = SimulatedClock(), itertools.count(1)
    assert wait_until(
        lambda: next(checks) == 5, 10, interval=0.25, max_interval=1.0, clock=clock.read, sleep=clock.sleep
    )
    assert clock.pauses == [0.25, 0.5, 1.0, 1.0]


def test_sync_wait_until_stops_when_the_time_is_up_even_mid_backoff() -> None:
    clock = SimulatedClock()
    assert wait_until(lambda: False, 2.0, interval=0.25, max_interval=1.0, clock=clock.read, sleep=clock.sleep) is False
    assert clock.pauses == [0.25, 0.5, 1.0, 1.0] and clock.now == 2.75  # 1.75 < 2.0: one more pause


def _refused() -> bool:
    raise ConnectionRefusedError("never")
