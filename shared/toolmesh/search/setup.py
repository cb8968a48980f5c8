"""Building the search service of a process from its settings."""

from __future__ import annotations

import asyncio
import functools

import asyncpg

from toolmesh.config import Settings
from toolmesh.embed.model import DIMENSIONS, load_embedder
from toolmesh.index.base import ToolIndex
from toolmesh.index.factory import shared_index
from toolmesh.index.qdrant import QdrantIndex
from toolmesh.search.service import IndexSource, SearchService
from toolmesh.store.tool_ids import tool_db_ids


def index_source(settings: Settings) -> IndexSource:
    """Qdrant (connected on first use), or the embedded index the process's indexer has open."""
    remote: list[ToolIndex] = []
    lock = asyncio.Lock()

    async def get() -> ToolIndex | None:
        if not settings.qdrant_url:
            return shared_index(settings)
        async with lock:
            if not remote:
                remote.append(await QdrantIndex.connect(settings.qdrant_url, DIMENSIONS))
        return remote[0]

    return get


async def build_search(settings: Settings, db: asyncpg.Pool | None) -> SearchService:
    """The search service: the configured index, the local model (or BM25 only), db ids from Postgres."""
    embedder = await asyncio.to_thread(load_embedder)
    db_ids = functools.partial(tool_db_ids, db) if db is not None else None
    return SearchService(index_source(settings), embedder, db_ids)
