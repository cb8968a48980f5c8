"""A process's bulk embedding on its own threads: tool snapshots for the index and the classifier.

Queries embed on their caller's thread (a few ms each). Everything else, the indexer's backlog and
skills, and the classifier's batches, queues on the process's one lane, whose threads (one per core
but one) take the requests, so bulk work leaves a core to queries even when the indexer and the
classifier of ``toolmesh up`` embed at once (the process context holds its ``EmbeddingLanes``). The
embedder's cache of recent texts makes the second request for a text free, whichever role asked
first. Requests marked ``first`` (the index's
vectors, which dense search needs) go before the others (classification, which search can do
without for a while); each kind runs in the order it came. Callers await the lane without holding a
thread: a backlog of classifier batches never starves the thread pool that queries embed on.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # the model's runtime (numpy) is loaded by the roles that embed, not with the process context
    from toolmesh.embed.model import Embedder, Vectors

T = TypeVar("T")
Request = tuple[int, int, Callable[..., Any], tuple[Any, ...], "Future[Any] | None"]
_FIRST, _LATER, _STOP = 0, 1, 2  # priorities: the request that ends the thread comes after every other


def default_threads() -> int:
    """One lane thread per core but one (at least one)."""
    return max(1, (os.cpu_count() or 1) - 1)


class EmbeddingLane:
    """Threads that run bulk embedding requests: those marked ``first`` first, each kind in order."""

    def __init__(self, embedder: Embedder, *, threads: int = 0) -> None:
        self._embedder = embedder
        # A priority queue and its own threads: an executor runs its queue in arrival order only.
        self._requests: queue.PriorityQueue[Request] = queue.PriorityQueue()
        self._arrival = itertools.count()
        self.threads = threads or default_threads()
        for _ in range(self.threads):
            threading.Thread(target=_serve, args=(self._requests,), name="toolmesh-embed-bulk", daemon=True).start()
        weakref.finalize(self, _stop, self._requests, self.threads)

    async def embed(self, texts: list[str], *, first: bool = False) -> Vectors:
        """Unit vectors for ``texts``, embedded on the lane."""
        return await self.run(self._embedder.embed, texts, first=first)

    async def run(self, work: Callable[..., T], *args: Any, first: bool = False) -> T:
        """``work(*args)`` on the lane (for work that embeds, such as the skills' vectors)."""
        future: Future[T] = Future()
        self._requests.put((_FIRST if first else _LATER, next(self._arrival), work, args, future))
        return await asyncio.wrap_future(future)


def _stop(requests: queue.PriorityQueue[Request], threads: int) -> None:
    """End a lane's threads once the requests queued before are done."""
    for number in range(threads):
        requests.put((_STOP, number, _serve, (), None))


def _serve(requests: queue.PriorityQueue[Request]) -> None:
    """The lane's thread: run requests until the lane is gone."""
    while True:
        _, _, work, args, future = requests.get()
        if future is None:
            return
        if not future.set_running_or_notify_cancel():
            continue  # its caller gave up waiting
        try:
            future.set_result(work(*args))
        except BaseException as exc:  # handed to the caller, as an executor does
            future.set_exception(exc)


class EmbeddingLanes:
    """The bulk lanes of one process, one per embedder, each made on first use."""

    def __init__(self) -> None:
        self._lanes: dict[Embedder, EmbeddingLane] = {}
        self._lock = threading.Lock()  # roles ask from their own threads (the classifier on a worker thread)

    def for_embedder(self, embedder: Embedder) -> EmbeddingLane:
        """The process's lane for ``embedder``: the same one for every role that embeds with it."""
        with self._lock:
            lane = self._lanes.get(embedder)
            if lane is None:
                lane = self._lanes[embedder] = EmbeddingLane(embedder)
            return lane
