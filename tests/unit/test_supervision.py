"""Waiting for an event with a timeout, as every loop of the roles does."""

from __future__ import annotations

import asyncio

import pytest

from toolmesh.platform.supervision import wait_event


async def test_a_cancel_that_arrives_as_the_event_is_set_still_cancels() -> None:
    # Python 3.11's asyncio.wait_for dropped this cancel: the call audit's flush loop then never
    # ended and the gateway did not stop.
    event = asyncio.Event()
    waiting = asyncio.Event()

    async def waiter() -> bool:
        waiting.set()
        return await wait_event(event, 60)

    task = asyncio.create_task(waiter())
    await waiting.wait()
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_wait_event_says_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, 60) is True
