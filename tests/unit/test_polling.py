"""``toolmesh.polling``: the one poll-until helper (sync and async checks, retried errors, time-outs)."""

from __future__ import annotations

import itertools
import time

import pytest

from toolmesh.polling import poll_until, wait_until

pytestmark = pytest.mark.unit


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
    started = time.monotonic()
    assert await poll_until(lambda: 0, 0.2, interval=0.05) == 0
    assert time.monotonic() - started >= 0.2


async def test_listed_errors_count_as_not_yet_and_others_propagate() -> None:
    attempts = itertools.count()

    def flaky() -> str:
        if next(attempts) < 2:
            raise ConnectionRefusedError("not yet")
        return "up"

    assert await poll_until(flaky, 5, interval=0, retry_on=(OSError,)) == "up"
    assert await poll_until(_refused, 0.1, interval=0.02, retry_on=(OSError,)) is None
    with pytest.raises(ConnectionRefusedError):
        await poll_until(_refused, 5, interval=0)


def test_sync_wait_until_backs_off_up_to_the_cap() -> None:
    stamps: list[float] = []

    def check() -> bool:
        stamps.append(time.monotonic())
        return len(stamps) == 5

    assert wait_until(check, 10, interval=0.01, max_interval=0.04) is True
    pauses = [b - a for a, b in itertools.pairwise(stamps)]
    assert pauses[0] >= 0.01 and pauses[1] >= 0.02 and pauses[2] >= 0.04 and pauses[3] < 0.08


def _refused() -> None:
    raise ConnectionRefusedError("never")
