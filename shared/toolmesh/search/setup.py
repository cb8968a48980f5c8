"""Building the search service of a process, and lending the indexer's catalog to the other roles.

The indexer role holds the catalog (``SearchTable``) and registers it here for the index it
projects; a gateway in the same process searches it directly, a gateway elsewhere forwards over
NATS (``search.remote``) to a process that holds one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Iterator
from typing import Any

from nats.js import JetStreamContext

from toolmesh.config import Settings
from toolmesh.contracts.events import EVENTS_STREAM
from toolmesh.embed.model import load_embedder
from toolmesh.index.factory import index_path
from toolmesh.runtime import Backends
from toolmesh.search.catalog import Catalog
from toolmesh.search.remote import RemoteSearch
from toolmesh.search.service import CatalogSource, SearchService
from toolmesh.search.table import SearchTable
from toolmesh.store.tool_ids import tool_db_ids

_tables: dict[str, SearchTable] = {}


def _key(settings: Settings) -> str:
    return settings.qdrant_url or str(index_path(settings).resolve())


@contextlib.contextmanager
def lend_table(settings: Settings, table: SearchTable) -> Iterator[None]:
    """Make ``table`` the catalog of this process's searches while the block runs."""
    _tables[_key(settings)] = table
    try:
        yield
    finally:
        if _tables.get(_key(settings)) is table:
            del _tables[_key(settings)]


def local_catalogs(settings: Settings) -> CatalogSource:
    """The catalog of the table the indexer of this process lent (None while there is none)."""

    async def get() -> Catalog | None:
        table = _tables.get(_key(settings))
        return await table.catalog() if table is not None else None

    return get


def index_lag(js: JetStreamContext) -> Any:
    """How far the catalog searches read is behind the event stream."""

    async def lag(catalog: Catalog) -> dict[str, Any]:
        info = await asyncio.wait_for(js.stream_info(EVENTS_STREAM), timeout=2.0)
        last = int(info.state.last_seq)
        return {
            "stream_last_seq": last,
            "events_behind": max(0, last - catalog.seq),
            "catalog_age_s": round(max(0.0, time.time() - catalog.built_at), 3),
        }

    return lag


async def build_search(backends: Backends) -> SearchService:
    """The search service: this process's catalog or a forwarder, the local model, db ids from Postgres."""
    embedder = await asyncio.to_thread(load_embedder)
    return SearchService(
        local_catalogs(backends.settings),
        embedder,
        functools.partial(tool_db_ids, backends.db),
        forwarder=RemoteSearch(backends.nc),
        lag=index_lag(backends.js),
    )
