"""2026-07-28 requests as an intermediary must check them (SEP-2243): ``Mcp-Method`` and ``Mcp-Name``
against the body (400 and ``-32020`` on a mismatch), whitespace around a header value is no part of it,
and ``initialize``, which that protocol removed, is a method no endpoint has (404, ``-32601``) — on
the aggregate ``/mcp`` and on a server's own ``/mcp/{name}`` alike."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import mcp_types
import pytest

from tests.harness import ADMIN_TOKEN, System, running_system
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
MODERN = "2026-07-28"
TOOL = {"/mcp": "demo__echo", "/mcp/demo": "echo"}


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url) as running, launch_peer("stdio") as peer:
        created = await running.register("demo", peer.transport_type, peer.config)
        await running.wait_connected(created["id"])
        yield running


async def modern(
    system: System, path: str, method: str, params: dict[str, Any], headers: dict[str, str]
) -> httpx.Response:
    """One stateless 2026-07-28 request to ``path`` with ``headers`` beside the required ones."""
    meta = {mcp_types.PROTOCOL_VERSION_META_KEY: MODERN, mcp_types.CLIENT_CAPABILITIES_META_KEY: {}}
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
    sent = {
        "Authorization": f"Bearer {ADMIN_TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        **headers,
    }
    async with httpx.AsyncClient(base_url=system.api.base_url, timeout=30) as http:
        return await http.post(path, json=body, headers=sent)


@pytest.mark.parametrize("path", ["/mcp", "/mcp/demo"])
async def test_whitespace_around_a_header_value_is_no_part_of_it(system: System, path: str) -> None:
    """Sent over a raw connection: HTTP clients trim such values themselves (before, 400 ``-32020``)."""
    meta = {mcp_types.PROTOCOL_VERSION_META_KEY: MODERN, mcp_types.CLIENT_CAPABILITIES_META_KEY: {}}
    params = {"name": TOOL[path], "arguments": {"text": "hi"}, "_meta": meta}
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {system.settings.host}:{system.settings.port}\r\n"
        f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n"
        f"Mcp-Method:  tools/call \r\nMcp-Name:   {TOOL[path]}\t\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    reader, writer = await asyncio.open_connection(system.settings.host, system.settings.port)
    writer.write(head.encode() + body)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    status_line, _, rest = raw.partition(b"\r\n")
    assert status_line.split()[1] == b"200", raw.decode(errors="replace")
    answer = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert answer["result"]["content"][0]["text"] == "hi", answer


@pytest.mark.parametrize("path", ["/mcp", "/mcp/demo"])
async def test_a_name_header_that_is_not_the_bodys_is_refused(system: System, path: str) -> None:
    call = {"name": TOOL[path], "arguments": {"text": "hi"}}
    refused = await modern(system, path, "tools/call", call, {"Mcp-Method": "tools/call", "Mcp-Name": "other"})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == mcp_types.HEADER_MISMATCH


@pytest.mark.parametrize("path", ["/mcp", "/mcp/demo"])
async def test_initialize_is_no_method_of_the_stateless_protocol(system: System, path: str) -> None:
    """Before, ``/mcp/{name}`` answered it from the upstream's description: 400 ``-32602``."""
    answered = await modern(system, path, "initialize", {}, {"Mcp-Method": "initialize"})
    assert answered.status_code == 404, answered.text
    assert answered.json()["error"]["code"] == mcp_types.METHOD_NOT_FOUND
