"""Entry point of the ``toolmesh`` command."""

from __future__ import annotations

import argparse
import sys

from toolmesh import eventloop
from toolmesh.config import Settings
from toolmesh.credentials import CredentialBox
from toolmesh.errors import ToolmeshError
from toolmesh.index.factory import open_index
from toolmesh.runtime import open_backends
from toolmesh.telemetry import configure_logging
from toolmesh_cli import commands, mcp_bridge, search_command, up
from toolmesh_cli.config_file import load_config
from toolmesh_cli.datadir import DataDirInUse
from toolmesh_cli.errors import CliError
from toolmesh_cli.roles import ROLES, run_roles, seed_admin
from toolmesh_cli.signals import stop_on_signals
from toolmesh_projector.indexer import reset_index
from toolmesh_projector.projector import reset_projection

REBUILDS = {"projector": "Postgres read model", "indexer": "vector index"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolmesh", description="MCP server aggregator")
    sub = parser.add_subparsers(dest="command", required=True)
    up.add_parser(sub)
    commands.add_parsers(sub)
    mcp_bridge.add_parser(sub)
    search_command.add_parser(sub)
    for name in ROLES:
        role = sub.add_parser(name, help=f"run the {name} role against TOOLMESH_NATS_URL / TOOLMESH_DATABASE_URL")
        if name == "gateway":
            role.add_argument("--host")
            role.add_argument("--port", type=int)
        if name in REBUILDS:
            role.add_argument(
                "--rebuild", action="store_true", help=f"drop the {REBUILDS[name]} and replay every event"
            )
    return parser


def _settings(args: argparse.Namespace) -> Settings:
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
    async with open_backends(settings, name) as backends:
        if name == "gateway":
            await seed_admin(backends, settings.admin_token)
        if rebuild and name == "projector":
            await reset_projection(backends.js, backends.db)
        if rebuild and name == "indexer":
            async with open_index(settings) as index:
                await reset_index(backends.js, index)
        await run_roles([name], backends, CredentialBox(settings.credential_key), stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run it; returns the process exit code."""
    args = _parser().parse_args(argv)
    try:
        if hasattr(args, "run"):
            return commands.run_command(args)
        config = load_config(args.config) if getattr(args, "config", None) else None
        settings = _settings(args)
        configure_logging(settings.log_level)
        if args.command == "up":
            return eventloop.run(up.run_up(settings, config))
        return eventloop.run(_run_role(args.command, settings, getattr(args, "rebuild", False)))
    except (CliError, ToolmeshError, DataDirInUse, OSError) as exc:
        print(f"toolmesh: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
