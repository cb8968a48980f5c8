"""Code mode (``run``) through ``/mcp`` against real peers: chaining, introspection, precedence, timeouts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.client.session import ClientSession

from tests.harness import System, eventually, running_system
from tests.mcp_client import mcp_session, text_of
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    """alpha (stdio) and beta (Streamable HTTP) demo peers, connected."""
    async with running_system(nats_url, database_url) as system, launch_peer("http") as http:
        async with launch_peer("stdio") as stdio:
            alpha = await system.register("alpha", stdio.transport_type, stdio.config)
        beta = await system.register("beta", http.transport_type, http.config)
        for created in (alpha, beta):
            await system.wait_connected(created["id"])
        yield system


async def run(session: ClientSession, code: str, timeout: float | None = None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"code": code, **({"timeout_seconds": timeout} if timeout else {})}
    result = await session.call_tool("run", arguments)
    body: dict[str, Any] = result.structured_content or {}
    assert body.get("ok") is (not result.is_error), text_of(result)
    return body


async def test_chained_calls_across_two_servers(system: System) -> None:
    code = 'a = alpha.echo(text="hello")\nb = beta.add(a=len(a["result"]), b=10)\nprint("sum", b["result"])\n[a, b]'
    async with mcp_session(system, mode="search") as session:
        body = await run(session, code)
    assert body["ok"], body
    assert body["result"] == [{"result": "hello"}, {"result": 15.0}]
    assert body["output"] == "sum 15.0\n" and body["tool_calls"] == 2


async def test_list_servers_and_tools_and_their_errors(system: System) -> None:
    async with mcp_session(system, mode="search") as session:
        servers = await run(session, "proxy.list_servers()")
        assert servers["result"] == [
            {"name": "alpha", "type": "stdio", "enabled": True, "status": "CONNECTED"},
            {"name": "beta", "type": "http", "enabled": True, "status": "CONNECTED"},
        ]
        tools = await run(session, 'proxy.list_tools(server="beta")')
        assert {"echo", "add", "slow", "stats"} <= {t["name"] for t in tools["result"]}
        missing = await run(session, 'proxy.list_tools(server="nope")')
        assert "available servers: alpha, beta" in missing["error"]
        pack = await run(session, "unknown.some_tool()")
        assert "available packs: alpha, beta, proxy, toolmesh" in pack["error"]
        tool = await run(session, "alpha.nonexistent()")
        listed = tool["error"].split("pack 'alpha' has no tool 'nonexistent'; available tools: ", 1)[1]
        assert listed.split(", ")[:3] == ["add", "add_tool", "ask"] and "echo" in listed.split(", ")


async def test_local_pack_wins_over_a_server_of_the_same_name(system: System) -> None:
    async with launch_peer("stdio") as peer:
        created = await system.register("toolmesh", peer.transport_type, peer.config)
    await system.wait_connected(created["id"])
    async with mcp_session(system, mode="search") as session:
        local = await run(session, 'toolmesh.search(query="add two numbers", limit=3)')
        assert isinstance(local["result"], list) and local["result"], local  # the local search, not the server's
        assert {"name", "pack", "tool", "description", "score"} <= set(local["result"][0])
        proxied = await run(session, 'alpha.search(query="x")')  # no collision: the proxied tool
        assert proxied["result"] == {"result": "results for x: doc-1, doc-2"}
        direct = await session.call_tool("call_tool", {"name": "toolmesh.search", "arguments": {"query": "q"}})
        assert "results for q" in text_of(direct)  # the server stays reachable outside code mode


async def test_timeout_cancels_the_run_and_the_upstream_call(system: System) -> None:
    async with mcp_session(system, mode="search") as session:
        body = await run(session, "beta.slow(seconds=30)", timeout=1.0)
        assert "TimeoutError" in body["error"] and "cancelled" in body["error"]

        async def cancelled_upstream() -> dict[str, Any] | None:
            stats = (await run(session, "beta.stats()"))["result"]
            return stats if stats["slow_cancelled"] == 1 else None

        stats = await eventually(cancelled_upstream, timeout=10, what="the upstream slow call to be cancelled")
        assert stats["slow_completed"] == 0
        spin = await run(session, "while True:\n    pass", timeout=1.0)
        assert "TimeoutError" in spin["error"]


async def test_escapes_are_refused_through_the_front_door(system: System) -> None:
    async with mcp_session(system, mode="search") as session:
        for code, expected in (
            ("import os\nos.listdir('/')", "PermissionError"),
            ("open('/etc/passwd').read()", "PermissionError"),
            ("__import__('os')", "NameError"),
            ("().__class__.__mro__[1].__subclasses__()", "AttributeError"),
            ("globals()", "NameError"),
            ("eval(\"__import__('os')\")", "NameError"),
        ):
            body = await run(session, code)
            assert expected in body["error"], (code, body)
