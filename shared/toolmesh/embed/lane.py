"""A process's bulk embedding, one request at a time: tool snapshots for the index and the classifier.

Queries embed on their caller's thread (a few ms each). Everything else, the indexer's backlog, the
classifier's batches and the skills' descriptions, queues on the process's one lane, so bulk work
never takes more than the cores the model's batch workers have (all but one), even when the indexer
and the classifier of ``toolmesh up`` embed at once. The embedder's cache of recent texts makes the
second request for a text free, whichever role asked first. Callers await the lane without holding a
thread: a backlog of classifier batches never starves the thread pool that queries embed on.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from toolmesh.embed.model import Embedder, Vectors

T = TypeVar("T")


class EmbeddingLane:
    """One thread that runs bulk embedding requests in the order they came."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="toolmesh-embed-bulk")

    async def embed(self, texts: list[str]) -> Vectors:
        """Unit vectors for ``texts``, embedded on the lane."""
        return await self.run(self.embedder.embed, texts)

    async def run(self, work: Callable[..., T], *args: object) -> T:
        """``work(*args)`` on the lane (for work that embeds, such as the skills' vectors)."""
        return await asyncio.wrap_future(self._thread.submit(work, *args))


_lanes: weakref.WeakKeyDictionary[Embedder, EmbeddingLane] = weakref.WeakKeyDictionary()
_lanes_lock = threading.Lock()


def bulk_lane(embedder: Embedder) -> EmbeddingLane:
    """The process's lane for ``embedder`` (one per embedder, made on first use)."""
    with _lanes_lock:
        lane = _lanes.get(embedder)
        if lane is None:
            lane = _lanes[embedder] = EmbeddingLane(embedder)
        return lane
