"""The roles a process can run, each against the backends it is given."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from toolmesh.bus.leases import LeaseTable
from toolmesh.bus.topology import leases_bucket
from toolmesh.credentials import CredentialBox, hash_token
from toolmesh.embed.model import load_embedder
from toolmesh.index.factory import open_index
from toolmesh.index.projection import IndexProjection
from toolmesh.naming import DEFAULT_NAMESPACE
from toolmesh.runtime import Backends
from toolmesh.skills.taxonomy import load_taxonomy
from toolmesh.store.principals import seed_owner
from toolmesh.supervision import supervise
from toolmesh_classifier.setup import build_classifier
from toolmesh_classifier.worker import run_classifier
from toolmesh_gateway.serve import run_gateway
from toolmesh_health.worker import HealthWorker
from toolmesh_projector.indexer import run_indexer
from toolmesh_projector.projector import run_projector
from toolmesh_session_worker.worker import SessionWorker

log = logging.getLogger("toolmesh")
Role = Callable[[Backends, CredentialBox, asyncio.Event], Awaitable[None]]


async def gateway(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """HTTP API."""
    await run_gateway(b, box, stop)


async def session_worker(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Upstream sessions."""
    await SessionWorker(b, box).run(stop)


async def health_worker(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Health checks (BR-006) and the reconnects they call for."""
    await HealthWorker(b).run(stop)


async def projector(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Postgres read model."""
    await supervise("projector", lambda: run_projector(b.js, b.db, stop), stop)


async def indexer(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Vector index of tools and skills (embedded in the data dir, or Qdrant)."""
    embedder = await asyncio.to_thread(load_embedder)
    skills = load_taxonomy(b.settings.skills_file)
    leases = LeaseTable(await leases_bucket(b.js, b.settings.lease_ttl_seconds), b.process_id)

    async def index_events() -> None:
        async with open_index(b.settings) as index:
            await run_indexer(b.nc, b.js, IndexProjection(index, embedder, skills), b.settings, leases, stop)

    await supervise("indexer", index_events, stop, backoff=5.0)


async def classifier_worker(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Skill classification of discovered tools (BR-004)."""

    async def classify() -> None:
        async with build_classifier(b.settings) as classifier:
            await run_classifier(b.js, classifier, stop, b.settings)

    await supervise("classifier-worker", classify, stop, backoff=5.0)


ROLES: dict[str, Role] = {
    "gateway": gateway,
    "session-worker": session_worker,
    "health-worker": health_worker,
    "projector": projector,
    "indexer": indexer,
    "classifier-worker": classifier_worker,
}


async def seed_owner_key(b: Backends, token: str | None) -> None:
    """Make ``token`` the bearer token of the owner ``admin`` (kept hashed; every namespace)."""
    if token:
        await seed_owner(b.db, name="admin", token_hash=hash_token(token), namespace=DEFAULT_NAMESPACE)


async def run_roles(names: list[str], b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Run several roles side by side; the first to fail stops the others."""
    async with asyncio.TaskGroup() as tg:
        for name in names:
            tg.create_task(_run_one(name, ROLES[name], b, box, stop), name=name)


async def _run_one(name: str, role: Role, b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    log.info("role %s started", name, extra={"role": name})
    try:
        await role(b, box, stop)
    finally:
        stop.set()
        log.info("role %s stopped", name, extra={"role": name})
