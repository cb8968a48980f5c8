"""The event stream and the read model outside any role: open both, run the projector up to a sequence."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
from nats.js import JetStreamContext

from tests.harness import eventually
from toolmesh.contracts.events import EVENTS_STREAM
from toolmesh.platform.bus.connection import connect_nats
from toolmesh.platform.bus.topology import ensure_topology
from toolmesh.platform.config import Settings
from toolmesh.platform.store.pool import open_pool
from toolmesh.platform.store.queries import applied_sequence
from toolmesh_projector.projector import run_projector


@contextlib.asynccontextmanager
async def stream_and_store(settings: Settings, name: str) -> AsyncIterator[tuple[JetStreamContext, asyncpg.Pool]]:
    """JetStream (its streams and buckets in place) and a pool on the settings' database, closed on exit."""
    assert settings.nats_url and settings.database_url
    nc = await connect_nats(settings.nats_url, name)
    db = await open_pool(settings.database_url)
    try:
        js = nc.jetstream()
        await ensure_topology(js, lease_ttl_seconds=settings.lease_ttl_seconds)
        yield js, db
    finally:
        await db.close()
        await nc.close()


async def last_event_seq(js: JetStreamContext) -> int:
    """The sequence of the newest event in the stream."""
    return int((await js.stream_info(EVENTS_STREAM)).state.last_seq)


async def applied_through(db: asyncpg.Pool, seq: int) -> bool:
    """True once the projector's checkpoint has reached ``seq``."""
    return await applied_sequence(db) >= seq


async def project_until(js: JetStreamContext, db: asyncpg.Pool, seq: int) -> None:
    """Run the projector in this process until it has applied ``seq``, then stop it."""
    stop = asyncio.Event()
    projector = asyncio.create_task(run_projector(js, db, stop))
    try:
        await eventually(lambda: applied_through(db, seq), timeout=60, what=f"the projector to apply {seq}")
    finally:
        stop.set()
        await projector
