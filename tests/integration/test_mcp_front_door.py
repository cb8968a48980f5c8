"""The gateway as an MCP server (``/mcp``, ``toolmesh mcp``): both modes against peers on all transports."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_client import Received, mcp_session, mcp_url, text_of
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
TRANSPORTS = {"alpha": "stdio", "beta": "sse", "gamma": "http"}


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    """A toolmesh with the demo peer registered over stdio (alpha), SSE (beta) and Streamable HTTP (gamma)."""
    async with (
        running_system(nats_url, database_url) as system,
        launch_peer("sse") as sse,
        launch_peer("http") as http,
        launch_peer("stdio") as stdio,
    ):
        peers = {"alpha": stdio, "beta": sse, "gamma": http}
        for name, peer in peers.items():
            created = await system.register(name, peer.transport_type, peer.config)
            await system.wait_connected(created["id"])
        yield system


async def tool_names(session: ClientSession) -> set[str]:
    return {tool.name for tool in (await session.list_tools()).tools}


async def test_all_mode_lists_and_calls_tools_on_every_transport(system: System) -> None:
    async with mcp_session(system) as session:
        names = await tool_names(session)
        for server in TRANSPORTS:
            assert {f"{server}__echo", f"{server}__add", f"{server}__progress"} <= names
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert listed["beta__add"].title == "beta.add"
        assert set(listed["beta__add"].input_schema["properties"]) == {"a", "b"}
        for server in TRANSPORTS:
            result = await session.call_tool(f"{server}__echo", {"text": f"hi {server}"})
            assert result.is_error is False and text_of(result) == f"hi {server}"
            assert result.meta is not None and result.meta["toolmesh/metadata"]["routed_to"] == server
        added = await session.call_tool("gamma__add", {"a": 2, "b": 3})
        assert added.structured_content == {"result": 5.0}
        failed = await session.call_tool("alpha__fail", {"message": "boom"})
        assert failed.is_error is True and "boom" in text_of(failed)
        missing = await session.call_tool("alpha__nope", {})
        assert missing.is_error is True and json.loads(text_of(missing))["error_code"] == "TOOL_NOT_FOUND"


async def test_calls_through_mcp_log_the_proxy_tool_call_span(system: System, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolmesh.session")
    async with mcp_session(system) as session:
        await session.call_tool("beta__echo", {"text": "traced"})
    spans = [r for r in caplog.records if getattr(r, "span", None) == "proxy.tool.call"]
    assert any(r.server == "beta" and r.tool == "echo" and r.status == "SUCCESS" for r in spans)  # type: ignore[attr-defined]
    record = next(r for r in spans if r.server == "beta")  # type: ignore[attr-defined]
    assert record.resultLength > 0 and record.duration >= 0  # type: ignore[attr-defined]


async def test_tools_list_changed_is_announced_when_a_server_is_added(system: System) -> None:
    received = Received()
    async with mcp_session(system, received=received) as session:
        assert "delta__echo" not in await tool_names(session)
        await received.standalone_opened()  # a list_changed sent before it would be dropped
        async with launch_peer("stdio") as peer:
            created = await system.register("delta", peer.transport_type, peer.config)
        await system.wait_connected(created["id"])
        await eventually(lambda: _true(received.tools_changed() > 0), timeout=10, what="tools/list_changed")
        assert "delta__echo" in await tool_names(session)
        before = received.tools_changed()
        response = await system.api.post(f"/api/v1/aggregator/servers/{created['id']}/disconnect")
        assert response.status_code == 200, response.text
        await eventually(lambda: _true(received.tools_changed() > before), timeout=10, what="a second list_changed")
        assert "delta__echo" not in await tool_names(session)


Update = tuple[float, float | None, str | None]


def progress_collector() -> tuple[list[Update], Callable[[float, float | None, str | None], Awaitable[None]]]:
    updates: list[Update] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    return updates, on_progress


async def _true(value: bool) -> bool:
    return value


async def test_progress_of_an_upstream_tool_reaches_the_mcp_client(system: System) -> None:
    for server in TRANSPORTS:
        updates, on_progress = progress_collector()
        async with mcp_session(system) as session:
            result = await session.call_tool(f"{server}__progress", {"steps": 3}, progress_callback=on_progress)
        assert text_of(result) == "done 3"
        assert updates == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")], server


async def test_search_tools_refuses_bad_arguments_as_a_tool_error_naming_them(system: System) -> None:
    async with mcp_session(system, mode="search") as session:
        for arguments, field in (
            ({"query": "echo", "limit": "many"}, "limit"),
            ({"query": "echo", "limit": 0}, "limit"),
            ({"query": "echo", "server_filter": "beta"}, "server_filter"),
        ):
            refused = await session.call_tool("search_tools", arguments)
            assert refused.is_error is True, arguments
            body = json.loads(text_of(refused))
            assert body["error_code"] == "VALIDATION_ERROR"
            assert [e["loc"] for e in body["context"]["errors"]] == [[field]]


async def test_search_mode_serves_the_meta_tools(system: System) -> None:
    async with mcp_session(system, mode="search") as session:
        assert await tool_names(session) == {"search_tools", "call_tool", "run"}
        found = await session.call_tool("search_tools", {"query": "add two numbers", "limit": 5})
        assert found.is_error is False
        hits = found.structured_content["tools"]  # type: ignore[index]
        assert hits and {"alpha.add", "beta.add", "gamma.add"} & {h["name"] for h in hits}
        assert all(h["input_schema"] is not None for h in hits)
        only = await session.call_tool("search_tools", {"query": "echo text", "server_filter": ["beta"]})
        assert {h["server"] for h in only.structured_content["tools"]} == {"beta"}  # type: ignore[index]
        called = await session.call_tool("call_tool", {"name": "gamma.add", "arguments": {"a": 1, "b": 2}})
        assert called.structured_content == {"result": 3.0}
        ran = await session.call_tool("run", {"code": "x = alpha.add(a=1, b=2)\nbeta.echo(text=str(x['result']))"})
        assert ran.is_error is False, text_of(ran)
        assert ran.structured_content["result"] == {"result": "3.0"}  # type: ignore[index]
        unknown = await session.call_tool("alpha__echo", {"text": "x"})
        assert unknown.is_error is True and "search mode" in text_of(unknown)


async def test_unauthenticated_and_invalid_mode_are_refused(system: System) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with httpx.AsyncClient(timeout=10) as http:
        for extra in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic x"}):
            response = await http.post(mcp_url(system), json=init, headers={**MCP_ACCEPT, **extra})
            assert response.status_code == 401, response.text
            assert response.json()["error_code"] == "UNAUTHORIZED"
            base = str(system.api.base_url).rstrip("/")
            metadata = f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
            expected = f'Bearer {metadata}, scope="mcp"'
            if extra:  # credentials were sent and refused (RFC 6750 §3.1)
                expected = f'Bearer error="invalid_token", {metadata}, scope="mcp"'
            assert response.headers["www-authenticate"] == expected
        auth = {**MCP_ACCEPT, "Authorization": f"Bearer {ADMIN_TOKEN}"}
        response = await http.post(mcp_url(system, "everything"), json=init, headers=auth)
        assert response.status_code == 400 and response.json()["context"] == {"mode": "everything"}
    with pytest.raises(ExceptionGroup) as raised:  # the SDK turns the 401 into an error answer to initialize
        async with mcp_session(system, token="wrong") as session:
            await session.list_tools()
    refused = raised.value.subgroup(MCPError)
    assert refused is not None, raised.value


async def test_toolmesh_mcp_bridges_stdio_to_a_running_gateway(system: System) -> None:
    base = f"http://{system.settings.host}:{system.settings.port}"
    for mode, expected in ((None, "alpha__echo"), ("search", "run")):
        args = ["-m", "toolmesh_cli.main", "mcp", "--url", base, *(["--mode", mode] if mode else [])]
        params = StdioServerParameters(command=sys.executable, args=args, env={"TOOLMESH_ADMIN_TOKEN": ADMIN_TOKEN})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = await tool_names(session)
            assert expected in names
            if mode is None:
                result = await session.call_tool("alpha__echo", {"text": "over stdio"})
                assert text_of(result) == "over stdio"
                updates, on_progress = progress_collector()
                await session.call_tool("gamma__progress", {"steps": 2}, progress_callback=on_progress)
                assert [u[0] for u in updates] == [1.0, 2.0]
            else:
                ran = await session.call_tool("run", {"code": "proxy.list_servers()"})
                assert [s["name"] for s in ran.structured_content["result"]] == ["alpha", "beta", "gamma"]  # type: ignore[index]


async def open_raw_session(http: httpx.AsyncClient, system: System) -> dict[str, str]:
    """Open an ``/mcp`` session by hand (initialize, initialized); the headers its requests carry."""
    headers = {**MCP_ACCEPT, "Authorization": f"Bearer {ADMIN_TOKEN}"}
    opened = await http.post(mcp_url(system), json=INITIALIZE, headers=headers)
    assert opened.status_code == 200, opened.text
    headers |= {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(mcp_url(system), json=initialized, headers=headers)).status_code == 202
    return headers


async def test_a_request_is_answered_with_json_unless_messages_precede_its_result(system: System) -> None:
    """The POST of a plain call gets its result as ``application/json``; one whose upstream reports
    progress first gets an SSE stream: the progress, then the result."""
    async with httpx.AsyncClient(timeout=30) as http:
        headers = await open_raw_session(http, system)

        echo = {"name": "alpha__echo", "arguments": {"text": "plain"}}
        plain = await http.post(
            mcp_url(system), json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo}, headers=headers
        )
        assert plain.status_code == 200 and plain.headers["content-type"] == "application/json"
        assert plain.json()["id"] == 2 and plain.json()["result"]["content"][0]["text"] == "plain"

        steps = {"name": "alpha__progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}}
        streamed = await http.post(
            mcp_url(system), json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": steps}, headers=headers
        )
        assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")]
        assert [e.get("method") for e in events[:-1]] == ["notifications/progress"] * 2
        assert events[-1]["id"] == 3 and "result" in events[-1]


async def test_a_result_slower_than_the_json_wait_comes_on_an_sse_stream(nats_url: str, database_url: str) -> None:
    """A call whose result takes longer than ``mcp_json_wait_seconds`` is answered on an SSE stream
    opened when that time is up (its pings keep proxies from closing it), which ends with the result."""
    async with (
        running_system(nats_url, database_url, mcp_json_wait_seconds=0.3) as system,
        launch_peer("stdio") as peer,
        httpx.AsyncClient(timeout=30) as http,
    ):
        await system.wait_connected((await system.register("alpha", peer.transport_type, peer.config))["id"])
        headers = await open_raw_session(http, system)

        slow = {"name": "alpha__slow", "arguments": {"seconds": 1.0}}
        answered = await http.post(
            mcp_url(system), json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": slow}, headers=headers
        )
        assert answered.status_code == 200 and answered.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[5:]) for line in answered.text.splitlines() if line.startswith("data:")]
        assert len(events) == 1 and events[0]["id"] == 2 and "result" in events[0]

        quick = {"name": "alpha__echo", "arguments": {"text": "plain"}}
        plain = await http.post(
            mcp_url(system), json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": quick}, headers=headers
        )
        assert plain.headers["content-type"] == "application/json" and plain.json()["id"] == 3
