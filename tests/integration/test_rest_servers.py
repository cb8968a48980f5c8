"""REST tool servers (connection API spec) next to an MCP server, against real NATS, Postgres and peers.

The REST peer (``tests/peers/rest_server.py``) runs as its own process on loopback, with a bearer
token the registration takes from ``${REST_PEER_TOKEN}``. Its tools are registered, discovered,
categorized, searched, called (success, 404, 500, a failure the tool reports, timeout),
health-checked and served on ``/mcp`` and ``/mcp/{server}`` like the MCP demo server's.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import mcp_types
import pytest
from mcp.shared.exceptions import MCPError

from tests.harness import System, eventually, running_system
from tests.mcp_client import mcp_session
from tests.peers.launch import launch_peer, launch_rest_peer
from toolmesh.contracts.event_types import decode_event
from toolmesh.contracts.events import (
    EVENTS_SUBJECTS,
    Event,
    ServerConnected,
    ServerDisconnected,
    ToolDiscovered,
    ToolsDiscovered,
)

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
CALL = "/api/v1/tools/call"
TOKEN = "rest-peer-secret-token"
REST_TOOLS = {"search_memory", "echo", "add", "send_email", "fail", "explode", "garble", "slow"}
# The registrations name ${REST_PEER_TOKEN}: the deployment allows it (nothing expands by default).
FAST_REST = {"rest_retry_backoff_seconds": 0.05, "rest_timeout_seconds": 5.0, "expandable_variables": ("REST_PEER_*",)}


@contextlib.asynccontextmanager
async def events(system: System) -> AsyncIterator[list[Event]]:
    """Every event published while the block runs, decoded."""
    seen: list[Event] = []

    async def on_event(msg: Any) -> None:
        event = decode_event(msg.subject, msg.data)
        if event is not None:
            seen.append(event)

    sub = await system.backends.nc.subscribe(EVENTS_SUBJECTS, cb=on_event)
    try:
        yield seen
    finally:
        await sub.unsubscribe()


def rest_config(url: str) -> dict[str, Any]:
    return {"url": url, "headers": {"Authorization": "Bearer ${REST_PEER_TOKEN}"}}


async def tools_of(system: System, server_id: str) -> dict[str, dict[str, Any]]:
    response = await system.api.get(f"{SERVERS}/{server_id}/tools")
    assert response.status_code == 200, response.text
    return {t["original_name"]: t for t in response.json()["tools"]}


async def call(system: System, name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> httpx.Response:
    return await system.api.post(CALL, json={"name": name, "arguments": arguments or {}, **extra})


@pytest.fixture
async def both(nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[System, str]]:
    """A toolmesh with the REST peer (``toolbox``) and the MCP demo server (``demo``) connected; yields
    the system and the REST peer's URL."""
    monkeypatch.setenv("REST_PEER_TOKEN", TOKEN)
    async with (
        running_system(nats_url, database_url, **FAST_REST) as system,
        launch_rest_peer(token=TOKEN) as url,
        launch_peer("stdio") as peer,
    ):
        rest = await system.register("toolbox", "REST", rest_config(url))
        demo = await system.register("demo", peer.transport_type, peer.config)
        await system.wait_connected(rest["id"])
        await system.wait_connected(demo["id"])
        yield system, url


async def server_id(system: System, name: str) -> str:
    listed = (await system.api.get(SERVERS)).json()["servers"]
    return str(next(s["id"] for s in listed if s["name"] == name))


async def test_rest_server_registers_discovers_categorizes_and_is_searchable(both: tuple[System, str]) -> None:
    system, url = both
    rest_id = await server_id(system, "toolbox")
    detail = await system.server(rest_id)
    assert detail["transport_type"] == "REST" and detail["status"] == "CONNECTED"
    assert detail["tool_count"] == len(REST_TOOLS)
    assert detail["connection_config"]["url"] == url
    assert TOKEN not in str(detail) and "${REST_PEER_TOKEN}" not in str(detail)  # masked

    tools = await tools_of(system, rest_id)
    assert set(tools) == REST_TOOLS
    assert tools["search_memory"]["name"] == "toolbox.search_memory"
    categories = {name: tool["category"] for name, tool in tools.items()}
    assert categories["search_memory"] == "memory"
    assert categories["send_email"] == "communication"
    assert categories["echo"] == "general"
    demo_tools = await tools_of(system, await server_id(system, "demo"))
    assert all(t["category"] for t in demo_tools.values())  # MCP tools are categorized too

    async def found() -> dict[str, Any] | None:
        body = {"query": "search semantic memories", "strategy": "flat", "limit": 5}
        result = (await system.api.post("/api/v1/search", json=body)).json()
        hits = [t for t in result["tools"] if t["name"] == "toolbox.search_memory"]
        return hits[0] if hits else None

    hit = await eventually(found, what="search to find the REST tool")
    assert hit["source_server"]["name"] == "toolbox"

    async def classified() -> bool:
        return all(t["is_classified"] for t in (await tools_of(system, rest_id)).values())

    await eventually(classified, what="the REST tools to be classified into skills")

    # Calls carried the token and a fresh UUID requestId each.
    for text in ("one", "two"):
        assert (await call(system, "toolbox.echo", {"text": text})).status_code == 200
    async with httpx.AsyncClient() as peer:
        received = (await peer.get(f"{url}/requests")).json()
    ids = [r["body"]["requestId"] for r in received if r["body"]["tool"] == "echo"]
    assert len(set(ids)) == 2 and all(uuid.UUID(i).version == 4 for i in ids)
    assert all(r["authorized"] for r in received)


async def test_rest_calls_success_failure_404_500_and_timeout(both: tuple[System, str]) -> None:
    system, url = both
    ok = await call(system, "search_memory", {"query": "paris", "limit": 2})  # by its unique original name
    assert ok.status_code == 200, ok.text
    body = ok.json()
    assert body["isError"] is False
    assert body["structuredContent"] == {"results": ["memory 0 about paris", "memory 1 about paris"]}
    assert body["metadata"]["routed_to"] == "toolbox"

    added = (await call(system, "toolbox.add", {"a": 2, "b": 3})).json()
    assert added["content"] == [{"type": "text", "text": "5"}] and "structuredContent" not in added

    failed = (await call(system, "toolbox.fail")).json()
    assert failed["isError"] is True
    assert "Tool execution failed (fail): the disk is full" in failed["content"][0]["text"]

    exploded = await call(system, "toolbox.explode")
    assert exploded.status_code == 502
    assert exploded.json()["error_code"] == "EXECUTION_FAILED"
    assert "Tool execution failed (explode): boom" in exploded.json()["detail"]

    garbled = await call(system, "toolbox.garble")
    assert garbled.status_code == 502 and garbled.json()["error_code"] == "EXECUTION_FAILED"
    assert "protocol error" in garbled.json()["detail"] and "500" in garbled.json()["detail"]

    slow = await call(system, "toolbox.slow", {"seconds": 5}, timeout_seconds=0.5)
    assert slow.status_code == 504 and slow.json()["error_code"] == "EXECUTION_TIMEOUT"

    # The peer drops a tool after discovery: its call is 404 naming what the server has now, and the
    # tool list is published again without it.
    async with httpx.AsyncClient() as peer:
        await peer.post(f"{url}/control", json={"remove": "send_email"})
    missing = await call(system, "toolbox.send_email", {"to": "a@b.c"})
    assert missing.status_code == 404, missing.text
    error = missing.json()
    assert error["error_code"] == "TOOL_NOT_FOUND"
    assert set(error["context"]["available"]) == REST_TOOLS - {"send_email"}
    assert "Available tools:" in error["detail"] and "send_email" not in error["detail"].split("Available tools:")[1]
    rest_id = await server_id(system, "toolbox")

    async def dropped() -> bool:
        return "send_email" not in await tools_of(system, rest_id)

    await eventually(dropped, what="the tool list to be published without send_email")
    # The MCP server next to it is unaffected.
    echoed = (await call(system, "demo.echo", {"text": "hi"})).json()
    assert echoed["content"] == [{"type": "text", "text": "hi"}]


async def test_the_same_call_through_mcp_reaches_rest_and_mcp_servers(both: tuple[System, str]) -> None:
    system, _ = both
    async with mcp_session(system) as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        assert {"toolbox__echo", "demo__echo", "toolbox__search_memory"} <= set(listed)
        meta = listed["toolbox__search_memory"].meta or {}
        assert meta.get("toolmesh/category") == "memory"
        assert (listed["demo__echo"].meta or {}).get("toolmesh/category") == "general"
        rest = await session.call_tool("toolbox__echo", {"text": "hello"})
        mcp = await session.call_tool("demo__echo", {"text": "hello"})
        assert rest.is_error is False and mcp.is_error is False
        assert (rest.structured_content or {})["text"] == "hello"
        assert isinstance(mcp.content[0], mcp_types.TextContent) and mcp.content[0].text == "hello"
        failed = await session.call_tool("toolbox__fail", {})
        assert failed.is_error is True

    async with mcp_session(system, path="/mcp/toolbox") as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == REST_TOOLS  # original names, as on /mcp/demo
        result = await session.call_tool("echo", {"text": "direct"})
        assert (result.structured_content or {})["text"] == "direct"
        with pytest.raises(MCPError) as raised:
            await session.list_resources()
        assert raised.value.error.code == mcp_types.METHOD_NOT_FOUND
    async with mcp_session(system, path="/mcp/demo") as session:
        result = await session.call_tool("echo", {"text": "direct"})
        assert isinstance(result.content[0], mcp_types.TextContent) and result.content[0].text == "direct"


async def test_rest_server_describes_itself_as_a_tools_only_server(both: tuple[System, str]) -> None:
    system, _ = both
    async with mcp_session(system, path="/mcp/toolbox") as session:
        described = session.initialize_result
        assert described is not None
        assert described.server_info.name == "toolbox"
        assert described.capabilities.tools is not None
        assert described.capabilities.resources is None and described.capabilities.prompts is None


@pytest.mark.parametrize(
    ("tools_list", "problem"),
    [
        ("no-tools", "the tool list has no 'tools' field"),
        ("not-a-list", "'tools' must be a list, not dict"),
        ("no-name", "tools[1] has no 'name'"),
        ("no-description", "tools[1] 'mystery' has no 'description'"),
    ],
)
async def test_a_malformed_tool_list_is_rejected_and_nothing_is_kept(
    nats_url: str, database_url: str, tools_list: str, problem: str
) -> None:
    async with (
        running_system(nats_url, database_url, roles=["gateway", "session-worker", "projector"], **FAST_REST) as system,
        launch_rest_peer(tools_list=tools_list) as url,
        events(system) as seen,
    ):
        created = await system.register("broken", "REST", {"url": url})
        detail = await system.wait_status(created["id"], "ERROR")
        assert problem in detail["error_message"], detail["error_message"]
        assert "protocol error" in detail["error_message"]
        assert detail["tool_count"] == 0
        assert await tools_of(system, created["id"]) == {}
        assert not [e for e in seen if isinstance(e, ToolsDiscovered | ToolDiscovered | ServerConnected)]
        assert "CONNECTED" not in await system.history(created["id"])


async def test_domain_events_connected_tool_discovered_and_graceful_disconnect(
    nats_url: str, database_url: str
) -> None:
    async with (
        running_system(nats_url, database_url, roles=["gateway", "session-worker", "projector"], **FAST_REST) as system,
        launch_rest_peer() as url,
        events(system) as seen,
    ):
        created = await system.register("toolbox", "REST", {"url": url})
        server = created["id"]
        await system.wait_connected(server)

        def of(kind: type[Event]) -> list[Any]:
            return [e for e in seen if isinstance(e, kind) and e.server_id == server]

        await eventually(lambda: _true(len(of(ToolDiscovered)) == len(REST_TOOLS)), what="one event per tool")
        connected = of(ServerConnected)
        assert len(connected) == 1 and connected[0].reconnect is False
        assert connected[0].tool_count == len(REST_TOOLS) and connected[0].transport_type == "REST"
        assert connected[0].agent == (await system.server(server))["created_by"] is not None
        discovered = {e.original_name: e for e in of(ToolDiscovered)}
        assert discovered["search_memory"].category == "memory"
        assert discovered["search_memory"].name == "toolbox.search_memory"
        assert all(e.namespace == "default" for e in seen if e.server_id == server)

        response = await system.api.post(f"{SERVERS}/{server}/disconnect")
        assert response.status_code == 200 and response.json()["status"] == "DISCONNECTED"
        await eventually(lambda: _true(len(of(ServerDisconnected)) == 1), what="the disconnected event")
        assert of(ServerDisconnected)[0].was_graceful is True

        assert (await system.api.post(f"{SERVERS}/{server}/connect")).status_code == 200
        await system.wait_connected(server)
        await eventually(lambda: _true(len(of(ServerConnected)) == 2), what="connected again")
        assert len(of(ToolDiscovered)) == len(REST_TOOLS)  # known tools are not discovered twice


async def _true(condition: bool) -> bool:
    return condition


async def test_rest_health_checks_degrade_error_and_reconnect(nats_url: str, database_url: str) -> None:
    fast_health = {
        "health_interval_seconds": 0.5,
        "health_check_timeout_seconds": 0.4,
        "reconnect_backoff_seconds": (0.5, 1.0, 1.0, 1.0),
    }
    roles = ["gateway", "session-worker", "projector", "health-worker"]
    async with (
        running_system(nats_url, database_url, roles=roles, **FAST_REST, **fast_health) as system,
        launch_rest_peer() as url,
        events(system) as seen,
    ):
        created = await system.register("toolbox", "REST", {"url": url})
        server = created["id"]
        await system.wait_connected(server)

        async def checked() -> dict[str, Any] | None:
            detail = await system.server(server)
            return detail if detail["last_health_check"] and detail["last_response_time_ms"] is not None else None

        assert (await eventually(checked, what="a passing health check"))["consecutive_failures"] == 0

        async with httpx.AsyncClient() as peer:
            await peer.post(f"{url}/control", json={"health": "error"})
            await eventually(lambda: _in_history(system, server, "ERROR"), what="ERROR after failed checks")
            trail = await system.history(server)
            assert "HEALTH_FAILED" in trail and "DEGRADED" in trail
            lost = [e for e in seen if isinstance(e, ServerDisconnected) and e.server_id == server]
            assert lost and lost[0].was_graceful is False and "503" in (lost[0].reason or "")
            await peer.post(f"{url}/control", json={"health": "ok"})
        await system.wait_status(server, "CONNECTED")
        back = [e for e in seen if isinstance(e, ServerConnected) and e.server_id == server]
        assert back[-1].reconnect is True
        assert (await call(system, "toolbox.echo", {"text": "again"})).status_code == 200


async def _in_history(system: System, server_id: str, event_type: str) -> bool:
    return event_type in await system.history(server_id)


async def test_a_rest_server_that_stops_answering_is_lost_and_its_calls_are_503(
    nats_url: str, database_url: str
) -> None:
    roles = ["gateway", "session-worker", "projector"]
    async with (
        running_system(nats_url, database_url, roles=roles, **FAST_REST) as system,
        events(system) as seen,
        contextlib.AsyncExitStack() as peer,
    ):
        url = await peer.enter_async_context(launch_rest_peer())
        created = await system.register("toolbox", "REST", {"url": url})
        await system.wait_connected(created["id"])
        await peer.aclose()  # the peer process is stopped

        gone = await call(system, "toolbox.echo", {"text": "anyone?"})
        assert gone.status_code == 503 and gone.json()["error_code"] == "SERVER_UNAVAILABLE"
        assert "cannot reach" in gone.json()["detail"]

        def lost() -> list[ServerDisconnected]:
            return [e for e in seen if isinstance(e, ServerDisconnected) and e.server_id == created["id"]]

        await eventually(lambda: _true(bool(lost())), what="the session to be given up")
        assert lost()[0].was_graceful is False and "Connection lost" in (lost()[0].reason or "")
        await system.wait_status(created["id"], "ERROR")  # and the reconnect finds nobody either


async def test_search_filters_by_category(both: tuple[System, str]) -> None:
    """Categories are a search filter: only tools of the asked categories come back."""
    system, _ = both

    async def found(categories: list[str] | None) -> set[str]:
        body: dict[str, Any] = {"query": "search memory send email echo", "limit": 50, "strategy": "flat"}
        if categories is not None:
            body["categories"] = categories
        response = await system.api.post("/api/v1/search", json=body)
        assert response.status_code == 200, response.text
        return {t["category"] for t in response.json()["tools"]}

    everything = await eventually(lambda: found(None), timeout=20, what="search results")
    assert len(everything) > 1
    only = await found(["memory"])
    assert only == {"memory"}
    bad = await system.api.post("/api/v1/search", json={"query": "x", "categories": ["nonsense"]})
    assert bad.status_code == 422
