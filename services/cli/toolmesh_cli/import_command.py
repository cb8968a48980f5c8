"""``toolmesh import FILE|URL``: register the ``mcpServers`` of a desktop MCP client's config, or the
servers of an MCP Registry document (``server.json``, or the registry API's ``{"server": ...}`` and
``{"servers": [...]}``), with per-server progress until they settle, and a summary."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from toolmesh.platform.polling import wait_until
from toolmesh.registry_import.documents import is_registry_document
from toolmesh_cli.client import ApiClient, api_options
from toolmesh_cli.errors import ApiError, ConfigError
from toolmesh_cli.mcp_servers import Entry, convert
from toolmesh_cli.progress import ServerProgress
from toolmesh_cli.registry_entries import Choice, convert_registry, parse_inputs, read_document, terminal_asker
from toolmesh_cli.tables import as_json

WAIT_SECONDS = 60.0
POLL_SECONDS = 0.5


def import_entries(args: argparse.Namespace) -> list[Entry]:
    """The entries of the file or URL: its ``mcpServers``, or the servers of a registry document."""
    document = read_document(args.file)
    registry_flags = args.input or args.package or args.remote or args.name
    if isinstance(document, dict) and "mcpServers" in document:
        if registry_flags:
            raise ConfigError("--input, --package, --remote and --name apply to MCP Registry documents only")
        return convert(document["mcpServers"])
    if not is_registry_document(document):
        raise ConfigError(
            f'{args.file}: expected an object with "mcpServers", or an MCP Registry server.json, '
            '{"server": {...}} or {"servers": [...]}'
        )
    choice = Choice(parse_inputs(args.input or []), args.package, args.remote, args.name)
    entries, warnings = convert_registry(document, choice, None if args.json else terminal_asker())
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return entries


def _names(entries: list[Entry]) -> list[str]:
    """A distinct name per entry: the server's, or the file's for an invalid one (numbered when taken)."""
    names: list[str] = []
    for entry in entries:
        name = entry.request.name if entry.request is not None else entry.source_name
        names.append(name if name not in names else f"{name} ({len(names) + 1})")
    return names


def _register(entry: Entry, name: str, api: ApiClient, no_connect: bool, progress: ServerProgress) -> None:
    progress.outcomes[name].source_name = entry.source_name if entry.renamed else None
    if entry.request is None:
        progress.failed(name, str(entry.problem), f"failed {entry.source_name}: {entry.problem}")
        return
    request = entry.request.model_copy(update={"auto_connect": False}) if no_connect else entry.request
    try:
        created = api.register(request)
    except ApiError as exc:
        if exc.status is None:  # not running, unreachable: nothing else will get in either
            raise
        progress.failed(name, str(exc), f"failed {entry.label}: {exc}")
        return
    renamed = f" (renamed from {entry.source_name!r})" if entry.renamed else ""
    line = f"added {created['name']}{renamed}: {created['transport_type']}, {created['status']}"
    progress.registered(name, created, line)


def _settle(api: ApiClient, progress: ServerProgress, seconds: float) -> None:
    """Follow the registered servers until none is connecting, or ``seconds`` passed."""

    def refreshed() -> bool:
        for server in api.servers():
            if server["name"] in progress.outcomes and server["id"] == progress.outcomes[server["name"]].server_id:
                detail = server if server["status"] != "ERROR" else api.server(server["id"])
                progress.status(server["name"], server["status"], server["tool_count"], detail.get("error_message"))
        return not progress.pending()

    if progress.pending():
        wait_until(refreshed, seconds, interval=POLL_SECONDS)


def import_servers(args: argparse.Namespace, api: ApiClient) -> int:
    """Register every server of a desktop client's ``mcpServers`` JSON or of an MCP Registry
    document; 1 when any was not registered."""
    entries = import_entries(args)
    names = _names(entries)
    progress = ServerProgress(names, quiet=args.json)
    with progress:
        for entry, name in zip(entries, names, strict=True):
            _register(entry, name, api, args.no_connect, progress)
        if args.wait > 0:
            _settle(api, progress, args.wait)
    outcomes = list(progress.outcomes.values())
    added = sum(1 for o in outcomes if o.server_id is not None)
    if args.json:
        print(as_json({"servers": [o.as_dict() for o in outcomes], "imported": added, "total": len(entries)}))
    else:
        progress.console.print(progress.summary())
        progress.say(f"imported {added} of {len(entries)} servers")
    return 0 if added == len(entries) else 1


def add_parser(sub: Any) -> None:
    """Add ``import`` to the top-level subcommands."""
    common = [api_options()]
    imp = sub.add_parser(
        "import",
        parents=common,
        help='register the "mcpServers" of a desktop MCP client config, or MCP Registry server.json entries',
    )
    imp.add_argument("file", metavar="FILE|URL", help="a JSON file, or an http(s) URL of an MCP Registry document")
    imp.add_argument(
        "--input",
        action="append",
        metavar="NAME=VALUE",
        help="a value for an input the registry entry declares (repeatable); asked on a terminal otherwise",
    )
    which = imp.add_mutually_exclusive_group()
    which.add_argument("--package", type=int, metavar="N", help="run the entry's Nth package (from 1)")
    which.add_argument("--remote", type=int, metavar="N", help="connect to the entry's Nth remote (from 1)")
    imp.add_argument("--name", help="the server's name (default: the registry name's last part)")
    imp.add_argument("--no-connect", action="store_true", help="register without connecting")
    imp.add_argument(
        "--wait",
        type=float,
        default=WAIT_SECONDS,
        metavar="SECONDS",
        help=f"follow the servers until they connect or fail, at most this long (default {WAIT_SECONDS:.0f}; 0: no)",
    )
    imp.set_defaults(run=import_servers)
