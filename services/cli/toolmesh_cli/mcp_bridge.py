"""``toolmesh mcp``: MCP over stdio for desktop clients, forwarded to a running gateway's ``/mcp``.

A message pump, not a second MCP server: every JSON-RPC message from stdin is sent to the
gateway over Streamable HTTP (with the admin token as bearer), and every message from the gateway
(results, progress, ``notifications/tools/list_changed``) is written to stdout. The gateway keeps
the one implementation of both modes; ``--mode`` picks one for this connection.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server

from toolmesh_cli.client import ApiClient, Target

log = logging.getLogger("toolmesh.cli.mcp")
MODES = ("all", "search")
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""Connect/write/pool bound, and the idle read bound of a response stream (the SDK's defaults)."""


def add_parser(sub: Any) -> None:
    """Register ``toolmesh mcp`` on the command's subparsers."""
    parser = sub.add_parser("mcp", help="serve the gateway's MCP tools over stdio (for desktop MCP clients)")
    parser.add_argument("--url", help="gateway URL (TOOLMESH_URL, default http://127.0.0.1:8081)")
    parser.add_argument("--token", help="API token (TOOLMESH_ADMIN_TOKEN, or <data dir>/admin-token)")
    parser.add_argument(
        "--mode", choices=MODES, default=os.environ.get("TOOLMESH_MCP_MODE") or None, help="all tools or search"
    )
    parser.set_defaults(run=run_mcp)


def run_mcp(args: argparse.Namespace, api: ApiClient) -> int:
    """Bridge stdin/stdout to the gateway until stdin closes."""
    anyio.run(bridge, api.target, args.mode)
    return 0


def endpoint(target: Target, mode: str | None) -> str:
    """The gateway's MCP URL for a mode."""
    return f"{target.url}/mcp" + (f"?mode={mode}" if mode else "")


async def bridge(target: Target, mode: str | None) -> None:
    """Pump messages both ways between this process's stdio and the gateway."""
    headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT) as http,
        stdio_server() as (stdin, stdout),
        streamable_http_client(endpoint(target, mode), http_client=http) as (remote_in, remote_out),
        anyio.create_task_group() as tg,
    ):

        async def upstream() -> None:
            await _pump(stdin, remote_out, "stdin")
            tg.cancel_scope.cancel()  # the client closed stdin: we are done

        tg.start_soon(upstream)
        tg.start_soon(_pump, remote_in, stdout, "gateway")


async def _pump(source: Any, sink: Any, name: str) -> None:
    async for message in source:
        if isinstance(message, Exception):
            log.warning("%s: %s", name, _describe(message))
            continue
        await sink.send(message)


def _describe(exc: Exception) -> str:
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"the gateway answered {exc.response.status_code} (check --url and --token)"
    return f"{type(exc).__name__}: {exc}"
