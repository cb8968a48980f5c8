"""An open-loop schedule of calls: started at a fixed rate whatever the answers do, so a system that
slows down sees the load it was offered, not one its own slowness throttled (the benchmarks' load and
the overload fault test). No imports of the other bench modules: tests import it as ``bench.pacing``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

Run = Callable[[int, float], Awaitable[None]]
"""One call: its number and its scheduled start (``time.perf_counter``)."""


async def paced(run: Run, rate: float, total: int, in_flight: int) -> float:
    """Start ``run`` ``total`` times, ``rate`` per second, at most ``in_flight`` at once (a start waits
    for a free slot: its latency from the schedule shows it), then wait for them all; the rate offered."""
    slots = asyncio.Semaphore(in_flight)
    tasks: set[asyncio.Task[None]] = set()

    async def one(n: int, scheduled: float) -> None:
        try:
            await run(n, scheduled)
        finally:
            slots.release()

    start = time.perf_counter()
    for n in range(total):
        scheduled = start + n / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await slots.acquire()
        task = asyncio.create_task(one(n, scheduled))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    offered = total / (time.perf_counter() - start)
    await asyncio.gather(*tasks)
    return offered
