"""Background work that is owned: every loop runs under a supervisor that logs and restarts it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("toolmesh.supervision")


async def supervise(
    name: str, loop: Callable[[], Awaitable[None]], stop: asyncio.Event, *, backoff: float = 1.0
) -> None:
    """Run ``loop`` until ``stop`` is set, restarting it (with a pause) when it fails."""
    while not stop.is_set():
        try:
            await loop()
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s failed; restarting in %.1fs", name, backoff, extra={"role": name})
            await wait_event(stop, backoff)


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``event``; True when it is set.

    A cancel that arrives just as the event is set still cancels: Python 3.11's ``asyncio.wait_for``
    returns the event's result then and drops the cancel, so a loop waiting that way never ends.
    """
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


class TaskSet:
    """Short-lived tasks owned by one object: tracked while they run, cancelled together."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: set[asyncio.Task[object]] = set()

    def spawn(self, coro: Awaitable[object]) -> asyncio.Task[object]:
        """Run ``coro`` in the background; failures are logged, never lost."""
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[object]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s task failed", self._name, exc_info=task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    async def finish(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the tasks to end on their own, then cancel what still runs."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)
        await self.cancel_all()

    async def cancel_all(self) -> None:
        """Cancel every task still running and wait for them to finish."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
