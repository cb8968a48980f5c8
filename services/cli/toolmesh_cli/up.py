"""``toolmesh up``: embedded NATS and Postgres when no URL is configured, then every role in one process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from toolmesh.config import Settings
from toolmesh.credentials import CredentialBox, new_key
from toolmesh.embedded import EmbeddedNats, EmbeddedPostgres
from toolmesh.runtime import Backends, open_backends
from toolmesh_cli.config_file import ServerConfig
from toolmesh_cli.datadir import DataDirLock, load_or_create_secret, prepare_data_dir
from toolmesh_cli.provisioning import api_base, provision_until_stopped
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


def add_parser(sub: Any) -> None:
    """Add ``up`` to the top-level subcommands."""
    up = sub.add_parser("up", help="run everything in one process (embedded NATS and Postgres by default)")
    up.add_argument("--data-dir", type=Path, help="where state lives (default ~/.toolmesh)")
    up.add_argument("--host", help="address the HTTP API binds to (default 127.0.0.1)")
    up.add_argument("--port", type=int, help="port of the HTTP API (default 8081)")
    up.add_argument("--config", type=Path, help="YAML file of servers to register at start (servers: / mcpServers:)")


def settle_seconds(settings: Settings) -> float:
    """How long to wait for the config's servers to connect: one connection timeout plus the retries' backoff."""
    return settings.connection_timeout_seconds + sum(settings.connect_backoff_seconds[: settings.connect_retries])


async def _serve(
    settings: Settings,
    backends: Backends,
    box: CredentialBox,
    token: str,
    config: ServerConfig | None,
    stop: asyncio.Event,
) -> None:
    """The roles, and beside them the one-shot registration of the config's servers."""
    async with asyncio.TaskGroup() as tg:
        tg.create_task(run_roles(list(ROLES), backends, box, stop), name="roles")
        if config is not None and config.servers:
            base = api_base(settings.host, settings.port)
            tg.create_task(
                provision_until_stopped(base, token, config.servers, settle_seconds(settings), stop), name="config"
            )


def _say(line: str) -> None:
    print(line, flush=True)


async def run_up(settings: Settings, config: ServerConfig | None = None) -> int:
    """Run everything in one process until SIGTERM/SIGINT, registering ``config``'s servers; the exit code."""
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
            if config is not None:
                for note in config.notes:
                    log.info("config: %s", note)
            await _serve(settings, backends, CredentialBox(key), token, config, stop)
    finally:
        lock.release()
    _say("toolmesh stopped")
    return 0
