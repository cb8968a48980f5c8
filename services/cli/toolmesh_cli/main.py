"""Entry point of the ``toolmesh`` command.

Client commands must start fast, so nothing heavy is imported up front: the top-level parser
names every command, and only the module of the command being run is imported to add its
arguments and run it. ``toolmesh servers list`` never loads the server side (gateway, embedder,
index, onnxruntime); ``toolmesh up`` and the roles load it when they start.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from toolmesh.errors import ToolmeshError
from toolmesh_cli.datadir import DataDirInUse
from toolmesh_cli.errors import CliError

ROLES = ("gateway", "session-worker", "health-worker", "projector", "indexer", "classifier-worker")
"""The roles a process can run on its own (``toolmesh_cli.roles.ROLES`` holds what each runs)."""

COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("toolmesh_cli.up:add_parser", "run everything in one process (embedded NATS and Postgres by default)"),
    "servers": ("toolmesh_cli.commands:add_parsers", "register and manage upstream MCP servers"),
    "tools": ("toolmesh_cli.commands:add_parsers", "discovered tools"),
    "import": ("toolmesh_cli.import_command:add_parser", 'register the "mcpServers" of a desktop MCP client config'),
    "keys": ("toolmesh_cli.key_commands:add_parser", "API keys, connected apps and the credential key"),
    "policies": ("toolmesh_cli.policy_commands:add_parser", "policies on tool calls (CEL): deny, approve, redact"),
    "quotas": ("toolmesh_cli.quota_commands:add_parser", "durable quotas of tool calls per key, namespace, server"),
    "search": ("toolmesh_cli.search_command:add_parser", "search tools of connected servers (BM25 + embeddings)"),
    "mcp": ("toolmesh_cli.mcp_bridge:add_parser", "serve the gateway's MCP tools over stdio (for desktop MCP clients)"),
    "probe": (
        "toolmesh_cli.probe.command:add_parser",
        "connect to an MCP server as toolmesh would (authorizing if asked), list what it offers",
    ),
    "asyncapi": ("toolmesh_cli.asyncapi_command:add_parser", "print the AsyncAPI document of the public NATS API"),
    **{
        role: ("toolmesh_cli.serving:add_role_parsers", f"run the {role} role alone (against TOOLMESH_NATS_URL etc.)")
        for role in ROLES
    },
}
"""Every command: ``module:function`` adding its parser (imported only when that command runs), and its help."""


def _chosen(argv: Sequence[str]) -> str | None:
    """The command named on the command line (the first word that is not an option)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser for ``argv``: the chosen command in full, every other one by name and help only."""
    parser = argparse.ArgumentParser(prog="toolmesh", description="MCP server aggregator")
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = _chosen(argv)
    if chosen in COMMANDS:
        module, _, function = COMMANDS[chosen][0].partition(":")
        getattr(importlib.import_module(module), function)(sub)
    for name, (_, help_) in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=help_)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run it; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv).parse_args(argv)
    try:
        if hasattr(args, "run"):
            from toolmesh_cli.commands import run_command

            return run_command(args)
        if hasattr(args, "offline"):
            result: int = args.offline(args)
            return result
        from toolmesh_cli.serving import serve

        return serve(args)
    except (CliError, ToolmeshError, DataDirInUse, OSError) as exc:
        print(f"toolmesh: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
