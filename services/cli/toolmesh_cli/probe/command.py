"""``toolmesh probe URL``: the command line, the run, and what it prints."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from contextlib import AsyncExitStack
from typing import Any

from toolmesh_cli import tables
from toolmesh_cli.errors import CliError, UsageError
from toolmesh_cli.eventloop import run as run_loop
from toolmesh_cli.probe import options
from toolmesh_cli.probe.authorization import Authorization, HeadlessAuthorization, LoopbackAuthorization
from toolmesh_cli.probe.connection import Offer, authorization_failure, call_tool, connected, read_offer
from toolmesh_cli.probe.scenario import Scenario, scenario_from


def add_parser(sub: Any) -> None:
    """Register ``toolmesh probe`` on the command's subparsers."""
    options.add_parser(sub).set_defaults(offline=run_probe)


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise UsageError("--args must be a JSON object")
    return value


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
        auth = await options.build_auth(args, authorization)
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
    if scenario is not None:
        scenario.fill(args)
    options.read_key_file(args)
    try:
        offer, result = run_loop(probe(args, scenario))
    except CliError:
        raise
    except Exception as exc:  # whatever stopped the probe is reported in one line
        reason = authorization_failure(exc) or _innermost(exc)
        raise CliError(f"probe of {args.url} failed: {type(reason).__name__}: {reason}") from exc
    _print(offer, result, args.json)
    return 1 if result is not None and result.get("isError") else 0
