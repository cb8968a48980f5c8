"""Opening the configured index: Qdrant when ``TOOLMESH_QDRANT_URL`` is set, else the embedded shard.

Only the indexer role opens it (other roles read the catalog it lends, or forward searches to it);
an embedded shard belongs to the one process that has it open.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from toolmesh.embed.model import DIMENSIONS
from toolmesh.index.base import ToolIndex
from toolmesh.platform.config import Settings
from toolmesh_projector.vector_index.edge import EdgeIndex


def index_path(settings: Settings) -> Path:
    """Where the embedded index lives."""
    return settings.data_dir / "index"


@contextlib.asynccontextmanager
async def open_index(settings: Settings) -> AsyncIterator[ToolIndex]:
    """The configured index, closed when the block exits."""
    index: ToolIndex
    if settings.qdrant_url:
        # qdrant-client (and numpy with it) costs ~70 MB of RSS: loaded only by processes that use it.
        from toolmesh_projector.vector_index.qdrant import QdrantIndex

        index = await QdrantIndex.connect(settings.qdrant_url, DIMENSIONS)
    else:
        index = await asyncio.to_thread(EdgeIndex, index_path(settings), DIMENSIONS)
    try:
        yield index
    finally:
        await index.close()
