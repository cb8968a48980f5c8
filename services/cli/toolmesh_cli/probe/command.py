"""``toolmesh probe URL``: the command line, the run, and what it prints."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from contextlib import AsyncExitStack
from typing import Any

import httpx2

from toolmesh_cli import tables
from toolmesh_cli.errors import CliError, UsageError
from toolmesh_cli.eventloop import run as run_loop
from toolmesh_cli.probe.authorization import (
    Authorization,
    ClientIdentity,
    HeadlessAuthorization,
    LoopbackAuthorization,
    MemoryTokenStorage,
    oauth_provider,
)
from toolmesh_cli.probe.connection import TRANSPORTS, Offer, authorization_failure, call_tool, connected, read_offer
from toolmesh_cli.probe.grants import ClientCredentials, client_credentials_auth
from toolmesh_cli.probe.scenario import Scenario, scenario_from


def add_parser(sub: Any) -> None:
    """Register ``toolmesh probe`` on the command's subparsers."""
    parser = sub.add_parser(
        "probe", help="connect to an MCP server as toolmesh would (authorizing if asked), list what it offers"
    )
    parser.add_argument("url", help="the server's MCP endpoint (Streamable HTTP or SSE)")
    parser.add_argument("--transport", choices=TRANSPORTS, default="auto", help="auto: Streamable HTTP, else SSE")
    parser.add_argument(
        "--headless", action="store_true", help="fetch the authorization URL without a browser (no login page)"
    )
    parser.add_argument("--call", metavar="TOOL", help="call this tool after listing")
    parser.add_argument("--args", default="{}", metavar="JSON", help="the tool's arguments (a JSON object)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each step of the MCP and OAuth client")
    parser.add_argument("--client-metadata-url", help="this client's Client ID Metadata Document (an HTTPS URL)")
    parser.add_argument("--client-id", help="a client pre-registered with the authorization server")
    parser.add_argument("--client-secret", help="its secret (TOOLMESH_PROBE_CLIENT_SECRET)")
    parser.add_argument(
        "--client-credentials",
        action="store_true",
        help="no user: the client credentials grant (--client-id, and a secret or --private-key)",
    )
    parser.add_argument("--private-key", metavar="PEM_FILE", help="sign private_key_jwt assertions with this key")
    parser.add_argument("--signing-alg", default="ES256", help="the private key's JWS algorithm (default ES256)")
    parser.add_argument("--issuer", help="the authorization server the client credentials belong to")
    parser.set_defaults(offline=run_probe)


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise UsageError("--args must be a JSON object")
    return value


def _client(args: argparse.Namespace, scenario: Scenario | None) -> tuple[str | None, str | None]:
    client_id, secret = args.client_id, args.client_secret or os.environ.get("TOOLMESH_PROBE_CLIENT_SECRET")
    given = scenario.client_credentials() if scenario else None
    return (client_id, secret) if client_id is not None or given is None else given


def _private_key(args: argparse.Namespace, scenario: Scenario | None) -> tuple[str, str] | None:
    if args.private_key:
        with open(args.private_key, encoding="utf-8") as pem:
            return pem.read(), args.signing_alg
    return scenario.private_key() if scenario else None


def _auth(args: argparse.Namespace, scenario: Scenario | None, authorization: Authorization) -> httpx2.Auth:
    """The OAuth client: the client credentials grant when asked for, else the authorization code grant."""
    client_id, secret = _client(args, scenario)
    if args.client_credentials or (scenario is not None and scenario.uses_client_credentials()):
        if client_id is None:
            raise UsageError("--client-credentials needs --client-id")
        key = _private_key(args, scenario)
        credentials = ClientCredentials(
            client_id,
            client_secret=secret,
            private_key_pem=key[0] if key else None,
            signing_algorithm=key[1] if key else args.signing_alg,
            issuer=args.issuer,
        )
        return client_credentials_auth(args.url, credentials, MemoryTokenStorage())
    identity = ClientIdentity(metadata_url=args.client_metadata_url, client_id=client_id, client_secret=secret)
    return oauth_provider(args.url, authorization, identity, MemoryTokenStorage())


def _show_url(url: str) -> None:
    print(f"Open this URL to authorize toolmesh:\n  {url}", file=sys.stderr, flush=True)


async def probe(args: argparse.Namespace, scenario: Scenario | None) -> tuple[Offer, dict[str, Any] | None]:
    """Connect, authorize if challenged, list the offer, make the call asked for."""
    arguments = _arguments(args.args)
    async with AsyncExitStack() as stack:
        authorization: Authorization
        if args.headless:
            authorization = HeadlessAuthorization()
        else:
            authorization = await stack.enter_async_context(LoopbackAuthorization(_show_url))
        auth = _auth(args, scenario, authorization)
        client, transport = await stack.enter_async_context(connected(args.url, args.transport, auth))
        offer = await read_offer(client, transport)
        tool = args.call or (scenario.default_call([t.name for t in offer.tools]) if scenario else None)
        result = await call_tool(client, tool, arguments) if tool else None
    return offer, result


def _print(offer: Offer, result: dict[str, Any] | None, as_json: bool) -> None:
    if as_json:
        print(tables.as_json({**offer.as_json(), "call": result}))
        return
    server = offer.server
    tables.show(
        tables.fields(
            [
                ("server", f"{server.name} {server.version}" if server else None),
                ("protocol", offer.protocol_version),
                ("transport", offer.transport),
            ]
        )
    )
    sections = [
        ("TOOL", [(t.name, tables.clip(t.description)) for t in offer.tools]),
        ("PROMPT", [(p.name, tables.clip(p.description)) for p in offer.prompts]),
        ("RESOURCE", [(r.uri, tables.clip(r.description or r.name)) for r in offer.resources]),
    ]
    for header, rows in sections:
        if rows:
            tables.show("")
            tables.show(tables.table([header, "DESCRIPTION"], rows))
    if result is not None:
        tables.show("")
        print(tables.as_json(result))


def _innermost(exc: BaseException) -> BaseException:
    """The one failure a task group's exception group wraps (the group itself when it holds several)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _log_to_stderr(verbose: bool) -> None:
    """The SDK's log on stderr when asked for; otherwise silent (it logs the failure the probe
    reports itself, traceback included)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if not verbose:
        logging.getLogger("mcp").setLevel(logging.CRITICAL + 1)


def run_probe(args: argparse.Namespace) -> int:
    """Run ``toolmesh probe``; a failed connect, authorization or call exits with 1."""
    _log_to_stderr(args.verbose)
    scenario = scenario_from(os.environ)
    try:
        offer, result = run_loop(probe(args, scenario))
    except CliError:
        raise
    except Exception as exc:  # whatever stopped the probe is reported in one line
        reason = authorization_failure(exc) or _innermost(exc)
        raise CliError(f"probe of {args.url} failed: {type(reason).__name__}: {reason}") from exc
    _print(offer, result, args.json)
    return 1 if result is not None and result.get("isError") else 0
