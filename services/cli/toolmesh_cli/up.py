"""``toolmesh up``: embedded NATS and Postgres when no URL is configured, then every role in one process."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator

from toolmesh.config import Settings
from toolmesh.credentials import CredentialBox, new_key
from toolmesh.embedded import EmbeddedNats, EmbeddedPostgres
from toolmesh.runtime import open_backends
from toolmesh_cli.datadir import DataDirLock, load_or_create_secret, prepare_data_dir
from toolmesh_cli.roles import ROLES, run_roles, seed_admin
from toolmesh_cli.signals import stop_on_signals

log = logging.getLogger("toolmesh.up")
DATABASE = "toolmesh"


@contextlib.asynccontextmanager
async def embedded_backends(settings: Settings) -> AsyncIterator[Settings]:
    """Start NATS and/or Postgres in the data dir when their URL is not set; yield completed settings."""
    async with contextlib.AsyncExitStack() as stack:
        updates: dict[str, str] = {}
        if not settings.nats_url:
            nats = EmbeddedNats(settings.data_dir / "nats")
            await nats.start()
            stack.push_async_callback(nats.stop)
            updates["nats_url"] = nats.url
        if not settings.database_url:
            postgres = EmbeddedPostgres(settings.data_dir / "postgres")
            await postgres.start()
            stack.push_async_callback(postgres.stop)
            updates["database_url"] = await postgres.ensure_database(DATABASE)
        yield settings.model_copy(update=updates)


def _say(line: str) -> None:
    print(line, flush=True)


async def run_up(settings: Settings) -> int:
    """Run everything in one process until SIGTERM/SIGINT; returns the exit code."""
    stop = stop_on_signals()
    data_dir = prepare_data_dir(settings.data_dir)
    settings = settings.model_copy(update={"data_dir": data_dir})
    lock = DataDirLock(data_dir)
    lock.acquire()
    try:
        key = settings.credential_key or load_or_create_secret(data_dir / "credential.key", new_key)[0]
        token, created = (settings.admin_token, False)
        if not token:
            token, created = load_or_create_secret(data_dir / "admin-token", lambda: secrets.token_urlsafe(32))
        async with embedded_backends(settings) as settings, open_backends(settings, "up") as backends:
            await seed_admin(backends, token)
            _say(f"toolmesh is up: http://{settings.host}:{settings.port}/api/v1/aggregator/health")
            _say(f"  nats: {settings.nats_url}  postgres: {settings.database_url}  data: {data_dir}")
            if created:
                _say(f"  admin token (shown once, kept in {data_dir / 'admin-token'}): {token}")
            await run_roles(list(ROLES), backends, CredentialBox(key), stop)
    finally:
        lock.release()
    _say("toolmesh stopped")
    return 0
