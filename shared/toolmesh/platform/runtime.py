"""The backends a role works with (NATS, JetStream, Postgres), opened once and passed in."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass

import asyncpg
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from toolmesh.errors import BackendUnavailable
from toolmesh.platform.bus.connection import connect_nats, nats_options
from toolmesh.platform.bus.local_first import LocalFirstBus
from toolmesh.platform.bus.nats_bus import NatsBus
from toolmesh.platform.bus.topology import ensure_streams, ensure_topology
from toolmesh.platform.config import Settings
from toolmesh.platform.deployment_secrets import guard_deployment_secrets
from toolmesh.platform.metrics import watch_loop_lag
from toolmesh.platform.process_context import ProcessContext
from toolmesh.platform.store.pool import open_pool


@dataclass
class Backends:
    """Connections shared by the roles of one process."""

    settings: Settings
    nc: NATS
    bus: LocalFirstBus
    """Core messaging (request/reply, pub/sub) over ``nc``; owned subjects are answered in-process."""
    js: JetStreamContext
    db: asyncpg.Pool
    process_id: str
    context: ProcessContext
    """What the roles sharing these connections share besides them (embedder, index, search catalog)."""


def process_identity(settings: Settings) -> str:
    """A name for this process in leases and logs: the configured worker id, or host:pid."""
    return settings.worker_id or f"{socket.gethostname()}:{os.getpid()}"


@contextlib.asynccontextmanager
async def open_backends(
    settings: Settings, role: str, *, streams: Collection[str] | None = None
) -> AsyncIterator[Backends]:
    """Connect to NATS and Postgres, create the topology and schema, and close both on exit; from
    here on the deployment's secrets are masked in this process's logs. With ``streams`` (the
    streams its roles use), only those are created; the buckets each role opens itself."""
    if not settings.nats_url or not settings.database_url:
        raise BackendUnavailable("TOOLMESH_NATS_URL and TOOLMESH_DATABASE_URL must be set for this role")
    guard_deployment_secrets(settings, os.environ)
    nc = await connect_nats(settings.nats_url, name=f"toolmesh-{role}", **nats_options(settings))
    try:
        js = nc.jetstream()
        if streams is None:
            await ensure_topology(js, lease_ttl_seconds=settings.lease_ttl_seconds, replicas=settings.nats_replicas)
        else:
            await ensure_streams(js, streams, replicas=settings.nats_replicas)
        db = await open_pool(settings.database_url)
        bus = LocalFirstBus(NatsBus(nc))
        context = ProcessContext()
        watch_loop_lag(role, lambda: context.loop_lag.seconds)
        sampling = asyncio.create_task(context.loop_lag.run(), name="loop-lag")
        try:
            yield Backends(
                settings=settings,
                nc=nc,
                bus=bus,
                js=js,
                db=db,
                process_id=process_identity(settings),
                context=context,
            )
        finally:
            sampling.cancel()
            await bus.close()
            await db.close()
    finally:
        with contextlib.suppress(Exception):
            await nc.drain()
