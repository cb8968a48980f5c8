"""Code-mode workers shared fairly between namespaces.

A gateway's pool has ``total`` workers. A run holds one from before it checks a worker out until it
ends. A namespace holds at most its quota's ``code_workers`` at once, so one tenant's long loops
cannot take the whole pool; a freed worker goes to the waiting run whose namespace holds the fewest
workers (the earliest of those first), so a busy namespace's queue never stands in front of a
namespace with nothing running.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field


@dataclass
class _Waiter:
    turn: int
    namespace: str = field(compare=False)
    granted: asyncio.Future[None] = field(compare=False)


class WorkerShares:
    """``total`` workers, at most ``cap(namespace)`` of them held by one namespace at once."""

    def __init__(self, total: int, cap: Callable[[str], int]) -> None:
        self._free = total
        self._cap = cap
        self._held: dict[str, int] = {}
        self._waiting: list[_Waiter] = []
        self._turns = itertools.count()

    def held_by(self, namespace: str) -> int:
        """Workers ``namespace`` holds now."""
        return self._held.get(namespace, 0)

    @contextlib.asynccontextmanager
    async def worker(self, namespace: str) -> AsyncIterator[None]:
        """Hold one worker for ``namespace`` while the block runs (waiting for its turn first)."""
        await self._acquire(namespace)
        try:
            yield
        finally:
            self._release(namespace)

    async def _acquire(self, namespace: str) -> None:
        if self._free > 0 and self._may_take(namespace):
            self._take(namespace)
            return
        waiter = _Waiter(next(self._turns), namespace, asyncio.get_running_loop().create_future())
        self._waiting.append(waiter)
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self._release(namespace)  # handed a worker as it was cancelled: pass it on
            else:
                self._waiting.remove(waiter)
            raise

    def _may_take(self, namespace: str) -> bool:
        return self.held_by(namespace) < self._cap(namespace)

    def _take(self, namespace: str) -> None:
        self._free -= 1
        self._held[namespace] = self.held_by(namespace) + 1

    def _release(self, namespace: str) -> None:
        self._free += 1
        left = self.held_by(namespace) - 1
        if left > 0:
            self._held[namespace] = left
        else:
            self._held.pop(namespace, None)
        self._hand_over()

    def _hand_over(self) -> None:
        """Give free workers to waiting runs: fewest held by their namespace first, then the earliest."""
        self._waiting = [w for w in self._waiting if not w.granted.done()]  # cancelled while waiting
        while self._free > 0:
            eligible = [w for w in self._waiting if self._may_take(w.namespace)]
            if not eligible:
                return
            chosen = min(eligible, key=lambda w: (self.held_by(w.namespace), w.turn))
            self._waiting.remove(chosen)
            self._take(chosen.namespace)
            chosen.granted.set_result(None)
