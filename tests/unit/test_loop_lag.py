"""A role's capacity follows its event loop's lag: the sampler sees a held loop and forgets it once the
loop runs on time; the limit shrinks step by step while the loop is late (never under the floor), holds
in between, and grows back to its ceiling while the loop runs on time; shedding off keeps the ceiling."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.harness import eventually
from toolmesh.platform.capacity import ADJUST_SECONDS, FLOOR, Capacity
from toolmesh.platform.loop_lag import SAMPLE_SECONDS, LoopLag

pytestmark = pytest.mark.unit


async def test_a_held_loop_shows_as_lag_and_the_lag_falls_once_it_runs_on_time() -> None:
    sampler = LoopLag()
    sampling = asyncio.create_task(sampler.run())
    try:
        await asyncio.sleep(SAMPLE_SECONDS * 3)  # the sampler has started
        for _ in range(5):  # the loop held 0.2 s at a time, the sampler let in between
            time.sleep(0.2)  # noqa: ASYNC251 - holding the loop is the point
            await asyncio.sleep(0)
        assert sampler.seconds > 0.05, sampler.seconds
        await eventually(lambda: sampler.seconds < 0.01, timeout=10, what="the lag gone once the loop runs on time")
    finally:
        sampling.cancel()


def late(seconds: float) -> LoopLag:
    lag = LoopLag()
    lag.seconds = seconds
    return lag


def test_the_limit_shrinks_while_late_holds_in_between_and_grows_back_to_its_ceiling() -> None:
    capacity = Capacity("test", ceiling=100, shed_at_ms=40, lag=late(0.0))
    capacity.adjust(0.2)
    assert capacity.limit == 90
    capacity.adjust(0.2, steps=2)  # two periods late since
    assert capacity.limit == 72
    for _ in range(100):
        capacity.adjust(0.2)
    assert capacity.limit == FLOOR
    capacity.adjust(0.03)  # between half the threshold and the threshold: no move
    assert capacity.limit == FLOOR
    capacity.adjust(0.001)
    assert capacity.limit == FLOOR + 1
    capacity.adjust(0.001, steps=100)  # a quiet spell of ten seconds
    assert capacity.limit == 100


def test_calls_past_the_lowered_limit_are_not_admitted_and_shedding_off_keeps_the_ceiling() -> None:
    clock = [0.0]
    capacity = Capacity("test", ceiling=10, shed_at_ms=40, lag=late(1.0), clock=lambda: clock[0])
    assert capacity.admits(9)  # no period passed yet: the ceiling holds
    clock[0] += ADJUST_SECONDS
    assert not capacity.admits(9) and capacity.limit == 9  # one period late
    assert capacity.admits(8)
    off = Capacity("test", ceiling=10, shed_at_ms=0, lag=late(1.0), clock=lambda: clock[0])
    clock[0] += 10 * ADJUST_SECONDS
    assert off.admits(9) and off.limit == 10
