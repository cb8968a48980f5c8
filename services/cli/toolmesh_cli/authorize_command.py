"""``toolmesh servers authorize NAME``: start the OAuth authorization of a server (issue 25), print
the URL to open, and wait until the server holds the grant it brought back (for a per-user server:
this key's own) and has connected with it."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from toolmesh.platform.polling import wait_until
from toolmesh_cli.client import ApiClient
from toolmesh_cli.errors import CliError
from toolmesh_cli.tables import as_json, console

HEALTHY = {"CONNECTED", "DEGRADED"}
POLL_SECONDS = 1.0


def _settled(detail: dict[str, Any]) -> bool:
    """Connected, or in an ERROR other than waiting for the authorization that nobody retries."""
    if detail["status"] in HEALTHY:
        return True
    waiting = bool(detail.get("needs_authorization"))
    return detail["status"] == "ERROR" and not waiting and detail.get("next_retry_at") is None


def _wait(api: ApiClient, server_id: str, seconds: float, quiet: bool, before: dict[str, Any]) -> dict[str, Any]:
    """The server's detail once it holds a grant newer than ``before`` (its authorization state when
    the URL was asked for) and settled; ``CliError`` when it did not in ``seconds``."""
    last: dict[str, Any] = {}

    def check() -> bool:
        now = api.authorization(server_id)
        if not now["authorized"] or now["authorized_at"] == before.get("authorized_at"):
            return False
        last.update(api.server(server_id))
        return _settled(last)

    out = console()
    status = out.status("waiting for the authorization…") if out.is_terminal and not quiet else None
    with status or contextlib.nullcontext():
        settled = wait_until(check, seconds, interval=POLL_SECONDS)
    if not settled:
        state = last.get("status", "unknown")
        if not last:
            raise CliError(f"not authorized after {seconds:g}s: the authorization did not come back")
        raise CliError(f"not connected after {seconds:g}s (status {state}: {last.get('error_message') or 'no error'})")
    return last


def servers_authorize(args: argparse.Namespace, api: ApiClient) -> int:
    """Print the authorization URL of an OAuth server, then wait until it connects (unless ``--no-wait``)."""
    server_id = api.resolve(args.server)
    status = api.server(server_id)["status"]
    before = api.authorization(server_id)
    reply = api.authorize(server_id)
    if args.json:
        print(as_json(reply), flush=True)
    elif reply["authorized"]:
        print(f"{args.server}: authorized by exchanging your token (no browser needed)", flush=True)
    else:
        print(f"Open this URL in a browser within {reply['expires_in']}s to authorize {args.server}:", flush=True)
        print(reply["authorization_url"], flush=True)
    if args.no_wait or reply["authorized"]:
        return 0
    if status == "DISCONNECTED":  # a person's choice: the callback connects only servers waiting in ERROR
        out = sys.stderr if args.json else sys.stdout  # --json: stdout holds the API's reply only
        words = f"after signing in, toolmesh servers connect {args.server}"
        print(f"{args.server} is DISCONNECTED, nothing connects it after the authorization: {words}", file=out)
        return 0
    seconds = float(reply["expires_in"]) if args.timeout is None else args.timeout
    detail = _wait(api, server_id, seconds, args.json, before)
    if detail["status"] not in HEALTHY:
        raise CliError(f"{args.server} did not connect: {detail.get('error_message') or detail['status']}")
    if not args.json:
        print(f"{args.server}: {detail['status']}, {detail.get('tool_count') or 0} tools", flush=True)
    return 0


def add_parser(servers: Any, common: list[argparse.ArgumentParser]) -> None:
    """Add ``authorize`` to the ``servers`` subcommands."""
    one = servers.add_parser("authorize", parents=common, help="authorize an OAuth server and wait until it connects")
    one.add_argument("server", metavar="ID_OR_NAME")
    one.add_argument("--no-wait", action="store_true", help="print the URL and return")
    one.add_argument("--timeout", type=float, metavar="S", help="seconds to wait (default: until the URL expires)")
    one.set_defaults(run=servers_authorize)
