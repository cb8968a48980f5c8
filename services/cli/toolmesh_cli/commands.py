"""``toolmesh servers ...`` and ``toolmesh tools list``: the API from a shell (``import``, ``keys`` and
``search`` have modules of their own)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from toolmesh.lifecycle import ServerStatus
from toolmesh_cli import authorize_command
from toolmesh_cli.client import ApiClient, api_options, resolve_target
from toolmesh_cli.errors import UsageError
from toolmesh_cli.mcp_servers import validate
from toolmesh_cli.tables import as_json, clip, fields, show, table, when

Command = Callable[[argparse.Namespace, ApiClient], int]


def run_command(args: argparse.Namespace) -> int:
    """Run the API command chosen on the command line; errors raise ``CliError``."""
    command: Command = args.run
    with ApiClient(resolve_target(args.url, args.token, os.environ)) as api:
        try:
            return command(args, api)
        except BrokenPipeError:  # stdout closed early (``| head``): not an error of ours
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected K=V, got {text!r}")
    return key, value


def _out(text: str) -> None:
    print(text, flush=True)


# servers


def servers_add(args: argparse.Namespace, api: ApiClient) -> int:
    """Register one server from command-line options."""
    if args.stdio is not None:
        if not args.stdio:
            raise UsageError("--stdio needs a command (and its arguments)")
        if args.header or args.credential:
            raise UsageError("--header and --credential are for network servers; use --env for --stdio")
        config: dict[str, Any] = {"command": args.stdio[0], "args": args.stdio[1:]}
        if args.env:
            config["env"] = dict(args.env)
        transport = "STDIO"
    else:
        if args.env:
            raise UsageError("--env is for --stdio servers; use --header for --sse/--http/--openapi")
        if args.credential and not args.openapi:
            raise UsageError("--credential is for --openapi servers (security scheme=value)")
        transport, key, url = (
            ("SSE", "url", args.sse)
            if args.sse
            else ("OPENAPI", "spec_url", args.openapi)
            if args.openapi
            else ("HTTP", "base_url", args.http)
        )
        config = {key: url, **({"headers": dict(args.header)} if args.header else {})}
        if args.credential:
            config["credentials"] = dict(args.credential)
    body: dict[str, Any] = {
        "name": args.name,
        "description": args.description,
        "transport_type": transport,
        "connection_config": config,
        "health_check_url": args.health_url,
        "auto_connect": not args.no_connect,
        "allow_insecure": args.allow_insecure,
    }
    try:
        request = validate(body)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    created = api.register(request)
    _out(as_json(created) if args.json else f"registered {created['name']} ({created['id']}): {created['status']}")
    return 0


def servers_list(args: argparse.Namespace, api: ApiClient) -> int:
    """Every registered server, optionally only those in one status."""
    servers = api.servers(status=args.status)
    if args.json:
        _out(as_json({"servers": servers, "total": len(servers)}))
    elif not servers:
        _out("no servers" + (f" in status {args.status}" if args.status else ""))
    else:
        rows = [
            (s["name"], s["status"], s["transport_type"], s["tool_count"], when(s["connected_at"]), s["id"])
            for s in servers
        ]
        show(table(("NAME", "STATUS", "TRANSPORT", "TOOLS", "CONNECTED", "ID"), rows))
    return 0


def servers_show(args: argparse.Namespace, api: ApiClient) -> int:
    """One server in detail (connection config masked by the API)."""
    s = api.server(api.resolve(args.server))
    if args.json:
        _out(as_json(s))
        return 0
    show(
        fields(
            [
                ("name", s.get("name")),
                ("id", s.get("id")),
                ("description", s.get("description")),
                ("status", s.get("status")),
                ("transport", s.get("transport_type")),
                ("connection", s.get("connection_config")),
                ("tools", s.get("tool_count")),
                ("health check", s.get("health_check_url")),
                ("last health", when(s.get("last_health_check"))),
                ("registered", when(s.get("registered_at"))),
                ("connected", when(s.get("connected_at"))),
                ("updated", when(s.get("updated_at"))),
                ("error", s.get("error_message")),
            ]
        )
    )
    return 0


def servers_connect(args: argparse.Namespace, api: ApiClient) -> int:
    """Ask for a connection (idempotent)."""
    reply = api.connect(api.resolve(args.server))
    _out(as_json(reply) if args.json else f"{args.server}: {reply['status']} ({reply['message']})")
    return 0


def servers_disconnect(args: argparse.Namespace, api: ApiClient) -> int:
    """Disconnect, draining pending calls unless ``--force``."""
    reply = api.disconnect(api.resolve(args.server), args.force)
    _out(as_json(reply) if args.json else f"{args.server}: {reply['status']} ({reply['message']})")
    return 0


def servers_rm(args: argparse.Namespace, api: ApiClient) -> int:
    """Remove a server with its tools and history."""
    server_id = api.resolve(args.server)
    api.remove(server_id)
    if args.json:
        _out(as_json({"id": server_id, "removed": True}))
    else:
        _out(f"removed {args.server}" + (f" ({server_id})" if server_id != args.server else ""))
    return 0


def servers_history(args: argparse.Namespace, api: ApiClient) -> int:
    """The connection history of a server, oldest first."""
    entries = api.history(api.resolve(args.server))
    if args.json:
        _out(as_json(entries))
    else:
        rows = [(when(e["timestamp"]), e["event_type"], e["details"]) for e in entries]
        show(table(("TIME", "EVENT", "DETAILS"), rows, coloured=("EVENT",)))
    return 0


# tools


def tools_list(args: argparse.Namespace, api: ApiClient) -> int:
    """The tools of one server, or of every server."""
    if args.server:
        server_id = api.resolve(args.server)
        tools = [{**t, "server_id": server_id} for t in api.tools(server_id)["tools"]]
    else:
        tools = [{**t, "server_id": s["id"]} for s in api.servers(include_tools=True) for t in s.get("tools") or []]
    if args.json:
        _out(as_json({"tools": tools, "total": len(tools)}))
    elif not tools:
        _out("no tools")
    else:
        rows = [(t["name"], "yes" if t["is_classified"] else "no", clip(t["description"])) for t in tools]
        show(table(("TOOL", "CLASSIFIED", "DESCRIPTION"), rows))
    return 0


# parsers


def add_parsers(sub: Any) -> None:
    """Add ``servers`` and ``tools`` to the top-level subcommands."""
    common = [api_options()]

    servers = sub.add_parser("servers", help="register and manage upstream MCP servers").add_subparsers(
        dest="action", required=True
    )
    add = servers.add_parser("add", parents=common, help="register a server (put --stdio CMD ARG... last)")
    add.add_argument("name")
    transport = add.add_mutually_exclusive_group(required=True)
    transport.add_argument("--stdio", nargs=argparse.REMAINDER, metavar="CMD", help="command and its arguments")
    transport.add_argument("--sse", metavar="URL", help="SSE endpoint")
    transport.add_argument("--http", metavar="URL", help="Streamable HTTP endpoint")
    transport.add_argument("--openapi", metavar="URL", help="an API's OpenAPI document (each operation is a tool)")
    add.add_argument("--env", type=_key_value, action="append", metavar="K=V", help="environment (STDIO)")
    add.add_argument("--header", type=_key_value, action="append", metavar="K=V", help="HTTP header (SSE/HTTP/OpenAPI)")
    add.add_argument(
        "--credential",
        type=_key_value,
        action="append",
        metavar="SCHEME=VALUE",
        help="OpenAPI security scheme credential",
    )
    add.add_argument("--description")
    add.add_argument("--health-url")
    add.add_argument("--no-connect", action="store_true", help="register without connecting")
    add.add_argument("--allow-insecure", action="store_true", help="accept a plain http:// URL on a remote host")
    add.set_defaults(run=servers_add)

    ls = servers.add_parser("list", parents=common, help="list servers")
    ls.add_argument("--status", type=str.upper, choices=[s.value for s in ServerStatus])
    ls.set_defaults(run=servers_list)
    for name, run, help_ in (
        ("show", servers_show, "one server in detail"),
        ("connect", servers_connect, "connect a server"),
        ("disconnect", servers_disconnect, "disconnect a server"),
        ("rm", servers_rm, "remove a server"),
        ("history", servers_history, "connection history of a server"),
    ):
        one = servers.add_parser(name, parents=common, help=help_)
        one.add_argument("server", metavar="ID_OR_NAME")
        one.set_defaults(run=run)
        if name == "disconnect":
            one.add_argument("--force", action="store_true", help="cancel pending calls instead of draining")
    authorize_command.add_parser(servers, common)

    tools = sub.add_parser("tools", help="discovered tools").add_subparsers(dest="action", required=True)
    tls = tools.add_parser("list", parents=common, help="list tools of one or every server")
    tls.add_argument("--server", metavar="ID_OR_NAME")
    tls.set_defaults(run=tools_list)
