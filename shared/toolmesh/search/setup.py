"""Building the search service of a process, and lending the indexer's catalog to the other roles.

The indexer role holds the catalog (``SearchTable``) and lends it to its process (the
``ProcessContext`` of its ``Backends``); a gateway in the same process searches it directly, a
gateway elsewhere forwards over NATS (``search.remote``) to a process that holds one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Iterator
from typing import Any

from nats.js import JetStreamContext

from toolmesh.contracts.events import EVENTS_STREAM
from toolmesh.embed.model import load_embedder
from toolmesh.platform.process_context import ProcessContext
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store.tool_ids import tool_db_ids
from toolmesh.search.catalog import Catalog
from toolmesh.search.remote import RemoteSearch
from toolmesh.search.service import CatalogSource, SearchService
from toolmesh.search.table import SearchTable


@contextlib.contextmanager
def lend_table(context: ProcessContext, table: SearchTable) -> Iterator[None]:
    """Make ``table`` the catalog of the searches of ``context``'s process while the block runs."""
    context.lent_table = table
    try:
        yield
    finally:
        if context.lent_table is table:
            context.lent_table = None


def local_catalogs(context: ProcessContext) -> CatalogSource:
    """The catalog of the table the indexer of ``context``'s process lent (None while there is none)."""

    async def get() -> Catalog | None:
        table = context.lent_table
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
    embedder = await asyncio.to_thread(backends.context.embedder, load_embedder)
    return SearchService(
        local_catalogs(backends.context),
        embedder,
        functools.partial(tool_db_ids, backends.db),
        forwarder=RemoteSearch(backends.bus),
        lag=index_lag(backends.js),
    )
