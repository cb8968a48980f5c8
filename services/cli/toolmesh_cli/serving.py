"""``toolmesh up`` and ``toolmesh <role>``: running toolmesh itself (imported only for those commands)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from toolmesh.credentials import CredentialBox
from toolmesh.errors import ToolmeshError
from toolmesh.platform.config import Settings
from toolmesh.platform.metrics_http import scrape_tokens, serve_metrics
from toolmesh.platform.runtime import open_backends
from toolmesh.platform.telemetry import configure_logging
from toolmesh_cli import up
from toolmesh_cli.config_file import load_config
from toolmesh_cli.eventloop import run as run_loop
from toolmesh_cli.gc_tuning import tune_for_serving
from toolmesh_cli.main import COMMANDS
from toolmesh_cli.roles import ROLES, load_rebuild, run_roles, seed_owner_key, streams_of
from toolmesh_cli.signals import stop_on_signals

REBUILDS = {"projector": "Postgres read model", "indexer": "vector index"}


def add_role_parsers(sub: Any) -> None:
    """Add one subcommand per role."""
    for name in ROLES:
        role = sub.add_parser(name, help=COMMANDS[name][1])
        if name == "gateway":
            role.add_argument("--host")
            role.add_argument("--port", type=int)
        if name in REBUILDS:
            role.add_argument(
                "--rebuild", action="store_true", help=f"drop the {REBUILDS[name]} and replay every event"
            )


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings, with ``--data-dir``, ``--host`` and ``--port`` over the environment."""
    overrides = {
        key: value
        for key, value in (
            ("data_dir", getattr(args, "data_dir", None)),
            ("host", getattr(args, "host", None)),
            ("port", getattr(args, "port", None)),
        )
        if value is not None
    }
    return Settings(**overrides)


async def _run_role(name: str, settings: Settings, rebuild: bool) -> int:
    stop = stop_on_signals()
    if not settings.credential_key:
        raise ToolmeshError("MCP_CREDENTIAL_KEY must be set for a distributed role")
    async with open_backends(settings, name, streams=streams_of([name])) as backends:
        if name == "gateway":
            await seed_owner_key(backends, settings.admin_token)
        if rebuild and name in REBUILDS:
            await load_rebuild(name)(backends)
        box = CredentialBox.from_settings(settings.credential_key, settings.credential_previous_keys)
        async with asyncio.TaskGroup() as tg:
            # The gateway serves /metrics and /livez on its API port; every other role on its own.
            if name != "gateway" and settings.metrics_port:
                tg.create_task(serve_metrics(settings.host, settings.metrics_port, scrape_tokens(settings), stop))
            tg.create_task(run_roles([name], backends, box, stop))
    return 0


def serve(args: argparse.Namespace) -> int:
    """Run ``up`` or one role until SIGTERM/SIGINT; the exit code."""
    config = load_config(args.config) if getattr(args, "config", None) else None
    settings = settings_from(args)
    configure_logging(settings.log_level, log_format=settings.log_format)
    tune_for_serving()
    if args.command == "up":
        return run_loop(up.run_up(settings, config))
    return run_loop(_run_role(args.command, settings, getattr(args, "rebuild", False)))
