"""Opening the configured index: Qdrant when ``TOOLMESH_QDRANT_URL`` is set, else the embedded shard.

An embedded shard belongs to one process; the roles of that process (indexer, gateway,
classifier) share one open instance, counted so that the last role to leave closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from toolmesh.config import Settings
from toolmesh.embed.model import DIMENSIONS
from toolmesh.index.base import ToolIndex
from toolmesh.index.edge import EdgeIndex

_shared: dict[Path, tuple[EdgeIndex, int]] = {}
_lock = asyncio.Lock()


def index_path(settings: Settings) -> Path:
    """Where the embedded index lives."""
    return settings.data_dir / "index"


@contextlib.asynccontextmanager
async def open_index(settings: Settings) -> AsyncIterator[ToolIndex]:
    """The index for this process, closed when the block exits (shared while others still use it)."""
    if settings.qdrant_url:
        # qdrant-client (and numpy with it) costs ~70 MB of RSS: loaded only by processes that use it.
        from toolmesh.index.qdrant import QdrantIndex

        remote = await QdrantIndex.connect(settings.qdrant_url, DIMENSIONS)
        try:
            yield remote
        finally:
            await remote.close()
        return
    path = index_path(settings).resolve()
    async with _lock:
        edge, users = _shared.get(path, (None, 0))
        if edge is None:
            edge = await asyncio.to_thread(EdgeIndex, path, DIMENSIONS)
        _shared[path] = (edge, users + 1)
    try:
        yield edge
    finally:
        async with _lock:
            edge, users = _shared[path]
            if users <= 1:
                del _shared[path]
                await edge.close()
            else:
                _shared[path] = (edge, users - 1)


def shared_index(settings: Settings) -> ToolIndex | None:
    """The embedded index this process already has open (by its indexer role), else None."""
    entry = _shared.get(index_path(settings).resolve())
    return entry[0] if entry else None
