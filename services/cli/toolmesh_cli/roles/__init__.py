"""The roles a process can run, each against the backends it is given.

Each role lives in its own module, imported only when that role runs: a session-worker pod never
loads the gateway's web stack, the embedding model's runtime or the vector index clients.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable

from toolmesh.contracts.commands import COMMANDS_STREAM
from toolmesh.contracts.events import EVENTS_STREAM
from toolmesh.contracts.quotas import QUOTA_STREAMS
from toolmesh.credentials import CredentialBox, hash_token
from toolmesh.naming import DEFAULT_NAMESPACE
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store.principals import BOOTSTRAP_OWNER, seed_owner
from toolmesh.redaction import Secret, process_redactor

log = logging.getLogger("toolmesh")
Role = Callable[[Backends, CredentialBox, asyncio.Event], Awaitable[None]]

ROLES: dict[str, str] = {
    "gateway": "toolmesh_cli.roles.gateway",
    "session-worker": "toolmesh_cli.roles.session_worker",
    "health-worker": "toolmesh_cli.roles.health_worker",
    "projector": "toolmesh_cli.roles.projector",
    "indexer": "toolmesh_cli.roles.indexer",
    "classifier-worker": "toolmesh_cli.roles.classifier_worker",
}
"""Every role and the module whose ``run(backends, box, stop)`` runs it."""

STREAMS: dict[str, tuple[str, ...]] = {
    "gateway": (EVENTS_STREAM, COMMANDS_STREAM, *(name for name, _ in QUOTA_STREAMS.values())),
    "session-worker": (EVENTS_STREAM, COMMANDS_STREAM),
    "health-worker": (EVENTS_STREAM, COMMANDS_STREAM),
    "projector": (EVENTS_STREAM,),
    "indexer": (EVENTS_STREAM,),
    "classifier-worker": (EVENTS_STREAM, COMMANDS_STREAM),
}
"""The streams each role uses, and creates when it starts first (deploy/nats/nats.conf lets its
user look at and create those only)."""


def streams_of(names: list[str]) -> list[str]:
    """The streams the roles ``names`` use, each once."""
    return list(dict.fromkeys(stream for name in names for stream in STREAMS[name]))


def load_role(name: str) -> Role:
    """The ``run`` of role ``name`` (importing its module now)."""
    run: Role = importlib.import_module(ROLES[name]).run
    return run


def load_rebuild(name: str) -> Callable[[Backends], Awaitable[None]]:
    """The ``rebuild(backends)`` of role ``name`` (the projector's and the indexer's): drop what it
    built so that it replays every event."""
    rebuild: Callable[[Backends], Awaitable[None]] = importlib.import_module(ROLES[name]).rebuild
    return rebuild


async def seed_owner_key(b: Backends, token: str | None) -> None:
    """Make ``token`` the bearer token of the owner ``admin`` (kept hashed; every namespace), and
    a value this process's logs never show."""
    if token:
        process_redactor().add([Secret(token, "admin_token")])
        await seed_owner(b.db, name=BOOTSTRAP_OWNER, token_hash=hash_token(token), namespace=DEFAULT_NAMESPACE)


async def run_roles(names: list[str], b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Run several roles side by side; the first to fail stops the others."""
    async with asyncio.TaskGroup() as tg:
        for name in names:
            tg.create_task(_run_one(name, load_role(name), b, box, stop), name=name)


async def _run_one(name: str, role: Role, b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    log.info("role %s started", name, extra={"role": name})
    try:
        await role(b, box, stop)
    finally:
        stop.set()
        log.info("role %s stopped", name, extra={"role": name})
