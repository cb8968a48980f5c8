"""``toolmesh up``: embedded NATS and Postgres when no URL is configured, then every role in one process."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from toolmesh.credentials import CredentialBox, new_key
from toolmesh.platform.config import Settings
from toolmesh.platform.polling import poll_until
from toolmesh.platform.runtime import Backends, open_backends
from toolmesh.platform.store.consistency import wait_for_projection
from toolmesh.platform.store.queries import sealed_configs
from toolmesh.platform.store.upstream_tokens import sealed_grants
from toolmesh.rotation import reseal_under_current_key
from toolmesh_cli.announcements import ADMIN_TOKEN_FILE, banner, starting
from toolmesh_cli.config_file import ServerConfig
from toolmesh_cli.datadir import DataDirLock, load_or_create_secret, prepare_data_dir
from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres
from toolmesh_cli.endpoints import remove_endpoints, write_endpoints
from toolmesh_cli.key_commands import KEY_FILE, PREVIOUS_FILE
from toolmesh_cli.progress import ServerProgress
from toolmesh_cli.provisioning import HEALTH, api_base, provision_until_stopped
from toolmesh_cli.roles import ROLES, run_roles, seed_owner_key
from toolmesh_cli.signals import stop_on_signals
from toolmesh_cli.tables import console

log = logging.getLogger("toolmesh.up")
DATABASE = "toolmesh"
ROTATION_WAIT_SECONDS = 60.0
PROBE_SECONDS = 5.0
PROBE_INTERVAL_SECONDS = 0.1


@contextlib.asynccontextmanager
async def embedded_backends(settings: Settings, out: Console | None = None) -> AsyncIterator[Settings]:
    """Start NATS and/or Postgres in the data dir when their URL is not set; yield completed settings.
    ``out`` shows each start."""
    out = out or Console(quiet=True)
    async with contextlib.AsyncExitStack() as stack:
        updates: dict[str, str] = {}
        if not settings.nats_url:
            nats = EmbeddedNats(settings.data_dir / "nats")
            with starting(out, "NATS"):
                await nats.start()
            stack.push_async_callback(nats.stop)
            updates["nats_url"] = nats.url
        if not settings.database_url:
            postgres = EmbeddedPostgres(settings.data_dir / "postgres")
            with starting(out, "Postgres"):
                await postgres.start()
                updates["database_url"] = await postgres.ensure_database(DATABASE)
            stack.push_async_callback(postgres.stop)
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


async def finish_rotation(backends: Backends, box: CredentialBox, previous: Path) -> None:
    """After ``toolmesh keys rotate-credential-key``: reseal every config and upstream OAuth grant under
    the new key, wait for the projector to write the configs, then forget the old keys (the file of
    previous keys goes)."""
    _, seq = await reseal_under_current_key(backends, box, "toolmesh up")
    await wait_for_projection(backends.db, seq, ROTATION_WAIT_SECONDS)
    rows = await sealed_configs(backends.db)
    grants = await sealed_grants(backends.db)
    configs_current = all(box.is_current(r["connection_config"]["sealed"]) for r in rows)
    if configs_current and all(box.is_current(g["sealed_grant"]) for g in grants):
        await asyncio.to_thread(previous.unlink, missing_ok=True)
        log.info(
            "credential key rotated: %d server configs and %d upstream grants sealed under the new key",
            len(rows),
            len(grants),
        )


async def _serving(base_url: str, stop: asyncio.Event) -> bool:
    """Wait until the gateway at ``base_url`` answers HTTP (True), or ``stop`` is set first (False)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=PROBE_SECONDS) as http:

        async def answers() -> bool:
            return stop.is_set() or (await http.get(HEALTH)).status_code < 500

        await poll_until(answers, math.inf, interval=PROBE_INTERVAL_SECONDS, retry_on=(httpx.TransportError,))
    return not stop.is_set()


async def _welcome(
    settings: Settings, token: str, config: ServerConfig | None, stop: asyncio.Event, announce: Callable[[], None]
) -> None:
    """Once the gateway serves: ``announce`` (after the start-up logs, not among them), then register
    the config's servers with their progress below it."""
    base = api_base(settings.host, settings.port)
    if not await _serving(base, stop):
        return
    announce()
    if config is not None and config.servers:
        progress = ServerProgress([r.name for r in config.servers])
        await provision_until_stopped(base, token, config.servers, settle_seconds(settings), stop, progress)


async def _serve(
    settings: Settings,
    backends: Backends,
    box: CredentialBox,
    token: str,
    config: ServerConfig | None,
    stop: asyncio.Event,
    announce: Callable[[], None],
) -> None:
    """The roles, and beside them the banner and the one-shot registration of the config's servers
    (and the end of a credential-key rotation)."""
    previous = settings.data_dir / PREVIOUS_FILE
    async with asyncio.TaskGroup() as tg:
        tg.create_task(run_roles(list(ROLES), backends, box, stop), name="roles")
        if previous.exists() and not settings.credential_key:
            tg.create_task(finish_rotation(backends, box, previous), name="rotation")
        tg.create_task(_welcome(settings, token, config, stop, announce), name="welcome")


def one_process_limits(settings: Settings) -> Settings:
    """``settings`` for one process holding every session: unless ``TOOLMESH_MAX_SESSIONS_PER_WORKER``
    was set, its one session-worker may hold as many sessions as servers may be registered
    (``MCP_AGGREGATOR_MAX_SERVERS``), so the server limit is the one that binds."""
    if "max_sessions_per_worker" in settings.model_fields_set:
        return settings
    return settings.model_copy(update={"max_sessions_per_worker": settings.max_servers})


async def run_up(settings: Settings, config: ServerConfig | None = None) -> int:
    """Run everything in one process until SIGTERM/SIGINT, registering ``config``'s servers; the exit code."""
    stop = stop_on_signals()
    data_dir = prepare_data_dir(settings.data_dir)
    settings = one_process_limits(settings.model_copy(update={"data_dir": data_dir}))
    lock = DataDirLock(data_dir)
    lock.acquire()
    try:
        key = settings.credential_key or load_or_create_secret(data_dir / KEY_FILE, new_key)[0]
        previous = settings.credential_previous_keys
        if not settings.credential_key and (data_dir / PREVIOUS_FILE).exists():
            previous = ",".join((data_dir / PREVIOUS_FILE).read_text().split())
        token, created = (settings.admin_token, False)
        if not token:
            token, created = load_or_create_secret(data_dir / ADMIN_TOKEN_FILE, lambda: secrets.token_urlsafe(32))
        out = console()
        embedded = [name for name, url in (("nats", settings.nats_url), ("postgres", settings.database_url)) if not url]
        async with embedded_backends(settings, out) as settings, open_backends(settings, "up") as backends:
            await seed_owner_key(backends, token)
            write_endpoints(settings)
            if config is not None:
                for note in config.notes:
                    log.info("config: %s", note)
            box = CredentialBox.from_settings(key, previous)
            announce = functools.partial(banner, out, settings, embedded, list(ROLES), token if created else None)
            try:
                await _serve(settings, backends, box, token, config, stop, announce)
            finally:
                remove_endpoints(settings)
    finally:
        lock.release()
    console().print("toolmesh stopped")
    return 0
