"""Opening the configured index: Qdrant when ``TOOLMESH_QDRANT_URL`` is set, else the embedded shard.

An embedded shard belongs to one process; the roles of that process (indexer, gateway,
classifier) share one open instance (``SharedIndexes``, held by the process context), counted so
that the last role to leave closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from toolmesh.embed.model import DIMENSIONS
from toolmesh.index.base import ToolIndex
from toolmesh.index.sharing import SharedIndexes
from toolmesh.platform.config import Settings
from toolmesh_projector.vector_index.edge import EdgeIndex


def index_path(settings: Settings) -> Path:
    """Where the embedded index lives."""
    return settings.data_dir / "index"


@contextlib.asynccontextmanager
async def open_index(settings: Settings, shared: SharedIndexes) -> AsyncIterator[ToolIndex]:
    """The index for this process, closed when the block exits (an embedded one stays open while
    other roles of the process, sharing ``shared``, still use it)."""
    if settings.qdrant_url:
        # qdrant-client (and numpy with it) costs ~70 MB of RSS: loaded only by processes that use it.
        from toolmesh_projector.vector_index.qdrant import QdrantIndex

        remote = await QdrantIndex.connect(settings.qdrant_url, DIMENSIONS)
        try:
            yield remote
        finally:
            await remote.close()
        return
    async with shared.use(index_path(settings).resolve(), _open_edge) as edge:
        yield edge


async def _open_edge(path: Path) -> ToolIndex:
    return await asyncio.to_thread(EdgeIndex, path, DIMENSIONS)


def shared_index(settings: Settings, shared: SharedIndexes) -> ToolIndex | None:
    """The embedded index a role of this process (its indexer) already has open, else None."""
    return shared.get(index_path(settings).resolve())
