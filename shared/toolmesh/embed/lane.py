"""A process's bulk embedding, one request at a time: tool snapshots for the index and the classifier.

Queries embed on their caller's thread (a few ms each). Everything else, the indexer's backlog, the
classifier's batches and the skills' descriptions, queues on the process's one lane, so bulk work
never takes more than the cores the model's batch workers have (all but one), even when the indexer
and the classifier of ``toolmesh up`` embed at once. The embedder's cache of recent texts makes the
second request for a text free, whichever role asked first. Requests marked ``first`` (the index's
vectors, which dense search needs) go before the others (classification, which search can do
without for a while); each kind runs in the order it came. Callers await the lane without holding a
thread: a backlog of classifier batches never starves the thread pool that queries embed on.
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from toolmesh.embed.model import Embedder, Vectors

T = TypeVar("T")
Request = tuple[int, int, Callable[..., Any], tuple[Any, ...], "Future[Any] | None"]
_FIRST, _LATER, _STOP = 0, 1, 2  # priorities: the request that ends the thread comes after every other


class EmbeddingLane:
    """One thread that runs bulk embedding requests: those marked ``first`` first, each kind in order."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = weakref.ref(embedder)  # the registry is keyed by the embedder: no strong reference
        # A priority queue and one thread: an executor runs its queue in arrival order only.
        self._requests: queue.PriorityQueue[Request] = queue.PriorityQueue()
        self._arrival = itertools.count()
        threading.Thread(target=_serve, args=(self._requests,), name="toolmesh-embed-bulk", daemon=True).start()
        weakref.finalize(self, self._requests.put, (_STOP, 0, _serve, (), None))

    async def embed(self, texts: list[str], *, first: bool = False) -> Vectors:
        """Unit vectors for ``texts``, embedded on the lane."""
        embedder = self._embedder()
        if embedder is None:
            raise RuntimeError("the embedder of this lane is gone")
        return await self.run(embedder.embed, texts, first=first)

    async def run(self, work: Callable[..., T], *args: Any, first: bool = False) -> T:
        """``work(*args)`` on the lane (for work that embeds, such as the skills' vectors)."""
        future: Future[T] = Future()
        self._requests.put((_FIRST if first else _LATER, next(self._arrival), work, args, future))
        return await asyncio.wrap_future(future)


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


_lanes: weakref.WeakKeyDictionary[Embedder, EmbeddingLane] = weakref.WeakKeyDictionary()
_lanes_lock = threading.Lock()


def bulk_lane(embedder: Embedder) -> EmbeddingLane:
    """The process's lane for ``embedder`` (one per embedder, made on first use)."""
    with _lanes_lock:
        lane = _lanes.get(embedder)
        if lane is None:
            lane = _lanes[embedder] = EmbeddingLane(embedder)
        return lane
