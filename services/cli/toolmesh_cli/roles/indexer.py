"""The indexer role: the vector index of tools and skills."""

from __future__ import annotations

import asyncio

from toolmesh.credentials import CredentialBox
from toolmesh.embed.model import load_embedder
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.topology import leases_bucket
from toolmesh.platform.runtime import Backends
from toolmesh.platform.supervision import supervise
from toolmesh.skills.taxonomy import load_taxonomy
from toolmesh_projector.index_projection import IndexProjection
from toolmesh_projector.indexer import reset_index, run_indexer
from toolmesh_projector.vector_index.factory import open_index


async def run(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Vector index of tools and skills (embedded in the data dir, or Qdrant)."""
    embedder = await asyncio.to_thread(b.context.embedder, load_embedder)
    skills = load_taxonomy(b.settings.skills_file)
    kv = await leases_bucket(b.js, b.settings.lease_ttl_seconds, replicas=b.settings.nats_replicas)
    leases = LeaseTable(kv, b.process_id)

    async def index_events() -> None:
        async with open_index(b.settings) as index:
            projection = IndexProjection(index, embedder, skills, lanes=b.context.lanes)
            await run_indexer(b.bus, b.js, projection, b.settings, leases, stop, b.context)

    await supervise("indexer", index_events, stop, backoff=5.0)


async def rebuild(b: Backends) -> None:
    """Drop the vector index, so the indexer replays every event."""
    async with open_index(b.settings) as index:
        await reset_index(b.js, index)
