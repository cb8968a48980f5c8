"""The roles a process can run, each against the backends it is given."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from toolmesh.credentials import CredentialBox, hash_token
from toolmesh.runtime import Backends
from toolmesh.store.queries import upsert_principal
from toolmesh.supervision import supervise
from toolmesh_gateway.serve import run_gateway
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


async def projector(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Postgres read model."""
    await supervise("projector", lambda: run_projector(b.js, b.db, stop), stop)


ROLES: dict[str, Role] = {
    "gateway": gateway,
    "session-worker": session_worker,
    "projector": projector,
}


async def seed_admin(b: Backends, token: str | None) -> None:
    """Make ``token`` the bearer token of the first admin (kept hashed)."""
    if token:
        await upsert_principal(b.db, name="admin", token_hash=hash_token(token), role="admin", namespace="default")


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
