"""Server lifecycle through the API against real MCP peers (BR-001/002/003/007/008, EC-002/004/006)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.harness import System, eventually, processes_running, running_system
from tests.peers.everything import launch_everything
from tests.peers.launch import DEMO_SERVER, launch_peer
from toolmesh.contracts.commands import COMMANDS_STREAM, ConnectServer
from toolmesh.contracts.rpc import CallToolRpc, PingRpc
from toolmesh.errors import ServerUnavailable
from toolmesh.platform.bus.requests import NoOwner, ask_owner
from toolmesh.platform.bus.topology import names_bucket
from toolmesh_gateway.server_commands import name_key

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"


@pytest.fixture
async def system(nats_url: str, database_url: str):  # type: ignore[no-untyped-def]
    async with running_system(nats_url, database_url) as running:
        yield running


async def test_br001_validation_errors_name_the_field(system: System) -> None:
    response = await system.api.post(
        SERVERS, json={"name": "github-mcp", "transport_type": "SSE", "connection_config": {"headers": {}}}
    )
    assert response.status_code == 422
    error = response.json()["detail"][0]
    assert error["loc"] == ["body", "connection_config", "url"]
    assert error["msg"] == "SSE transport requires 'url' in connection_config"
    assert error["type"] == "value_error"
    for bad in ({"name": "Bad Name"}, {"transport_type": "FTP"}, {"connection_config": {}}):
        body = {"name": "ok", "transport_type": "HTTP", "connection_config": {"base_url": "http://x"}, **bad}
        assert (await system.api.post(SERVERS, json=body)).status_code == 422


async def test_br001_duplicate_name_is_409(system: System) -> None:
    config = {"command": "true"}
    await system.register("dup", "STDIO", config, auto_connect=False)
    response = await system.api.post(
        SERVERS, json={"name": "dup", "transport_type": "STDIO", "connection_config": config}
    )
    assert response.status_code == 409
    assert response.json()["detail"] == "Server already exists: dup"
    assert response.json()["error_code"] == "SERVER_ALREADY_EXISTS"


async def test_br001_registered_without_connect_is_disconnected(system: System) -> None:
    created = await system.register("idle", "STDIO", {"command": "true"}, auto_connect=False, description="d")
    assert created["status"] == "DISCONNECTED"
    assert created["tool_count"] == 0 and created["connected_at"] is None
    assert (await system.server(created["id"]))["status"] == "DISCONNECTED"


@pytest.mark.parametrize("transport", ["stdio", "sse", "http"])
async def test_br002_br003_demo_peer_connects_and_tools_are_namespaced(system: System, transport: str) -> None:
    async with launch_peer(transport) as peer:
        created = await system.register(f"demo-{transport}", peer.transport_type, peer.config)
        assert created["status"] == "CONNECTING"
        detail = await system.wait_connected(created["id"])
        assert detail["connected_at"] is not None and detail["error_message"] is None
        tools = (await system.api.get(f"{SERVERS}/{created['id']}/tools", params={"include_schemas": True})).json()
        names = {t["name"] for t in tools["tools"]}
        assert f"demo-{transport}.echo" in names
        echo = next(t for t in tools["tools"] if t["original_name"] == "echo")
        assert echo["input_schema"]["properties"]["text"]["type"] == "string"
        assert tools["total"] == detail["tool_count"] == tools["classified"] + tools["unclassified"]
        # Tools first: whoever sees CONNECTED (an event consumer, a client) can call them at once.
        assert (await system.history(created["id"]))[:4] == [
            "REGISTERED",
            "CONNECT_REQUESTED",
            "TOOLS_DISCOVERED",
            "CONNECTED",
        ]
        # Connecting again is idempotent.
        again = (await system.api.post(f"{SERVERS}/{created['id']}/connect")).json()
        assert again["status"] == "CONNECTED" and again["message"] == "Server already connected"


@pytest.mark.parametrize("transport", ["stdio", "sse", "http"])
async def test_server_everything_over_each_transport(system: System, transport: str) -> None:
    async with launch_everything(transport) as peer:
        created = await system.register(f"everything-{transport}", peer.transport_type, peer.config)
        await system.wait_connected(created["id"])
        tools = (await system.api.get(f"{SERVERS}/{created['id']}/tools")).json()["tools"]
        assert f"everything-{transport}.echo" in {t["name"] for t in tools}
        result = await ask_owner(
            system.backends.bus,
            created["id"],
            "call",
            CallToolRpc(tool="echo", arguments={"message": "hi"}, timeout_seconds=10),
            timeout=15,
        )
        assert result["content"][0]["text"] == "Echo: hi"


async def test_br002_unreachable_server_ends_in_error_after_retries(system: System) -> None:
    created = await system.register("nowhere", "HTTP", {"base_url": "http://127.0.0.1:9/mcp"})
    detail = await system.wait_status(created["id"], "ERROR")
    assert detail["error_message"].startswith("Connection failed")
    history = await system.history(created["id"])
    assert history[-2:] == ["CONNECTING", "ERROR"] or history[-1] == "ERROR"
    # From ERROR a user may connect again (ERROR -> CONNECTING).
    response = (await system.api.post(f"{SERVERS}/{created['id']}/connect")).json()
    assert response["status"] == "CONNECTING" and response["message"] == "Connection initiated"


async def test_ec006_thousand_tools_are_discovered(system: System) -> None:
    async with launch_peer("stdio", tools=1000, page_size=100) as peer:
        created = await system.register("big", "STDIO", peer.config)
        detail = await system.wait_connected(created["id"], timeout=60)
        assert detail["tool_count"] >= 1000


async def test_list_changed_and_refresh_rediscover(system: System) -> None:
    async with launch_peer("stdio") as peer:
        created = await system.register("live", "STDIO", peer.config)
        before = (await system.wait_connected(created["id"]))["tool_count"]
        await ask_owner(
            system.backends.bus,
            created["id"],
            "call",
            CallToolRpc(tool="add_tool", arguments={"name": "fresh"}, timeout_seconds=10),
            timeout=15,
        )

        async def grew() -> bool:
            return (await system.server(created["id"]))["tool_count"] == before + 1

        await eventually(grew, what="list_changed to trigger re-discovery")
        response = await system.api.post(f"{SERVERS}/{created['id']}/tools/refresh")
        assert response.status_code == 202
        assert response.json() == {
            "server_id": created["id"],
            "status": "REFRESHING",
            "message": "Tool discovery initiated",
        }


async def test_br007_disconnect_keeps_tools_and_reconnect_restores(system: System) -> None:
    async with launch_peer("stdio") as peer:
        created = await system.register("pausable", "STDIO", peer.config)
        tool_count = (await system.wait_connected(created["id"]))["tool_count"]
        response = await system.api.post(f"{SERVERS}/{created['id']}/disconnect", json={"force": False})
        assert response.status_code == 200
        assert response.json() == {
            "server_id": created["id"],
            "status": "DISCONNECTED",
            "pending_requests": 0,
            "message": "Server disconnected successfully",
        }
        detail = await system.server(created["id"])
        assert detail["status"] == "DISCONNECTED" and detail["tool_count"] == tool_count
        with pytest.raises(NoOwner):
            await ask_owner(system.backends.bus, created["id"], "ping", PingRpc(timeout_seconds=1), timeout=2)
        await system.api.post(f"{SERVERS}/{created['id']}/connect")
        await system.wait_connected(created["id"])


async def test_br007_disconnect_drains_pending_calls(system: System) -> None:
    async with launch_peer("stdio") as peer:
        created = await system.register("drain", "STDIO", peer.config)
        await system.wait_connected(created["id"])
        call = asyncio.create_task(
            ask_owner(
                system.backends.bus,
                created["id"],
                "call",
                CallToolRpc(tool="slow", arguments={"seconds": 1.5}, timeout_seconds=10),
                timeout=15,
            )
        )

        async def slow_started() -> bool | None:
            stats = await ask_owner(
                system.backends.bus, created["id"], "call", CallToolRpc(tool="stats", timeout_seconds=5), timeout=10
            )
            return stats["structuredContent"]["slow_started"] == 1 or None

        await eventually(slow_started, what="the slow call to be running upstream")
        response = (await system.api.post(f"{SERVERS}/{created['id']}/disconnect")).json()
        assert response["status"] == "DISCONNECTING" and response["pending_requests"] == 1
        assert response["message"] == "Waiting for 1 pending requests to complete"
        result = await call
        assert result.get("isError") in (None, False)
        await system.wait_status(created["id"], "DISCONNECTED")


async def test_br008_delete_cascades_and_unknown_is_404(system: System) -> None:
    async with launch_peer("stdio") as peer:
        created = await system.register("gone", "STDIO", peer.config)
        await system.wait_connected(created["id"])
        assert (await system.api.delete(f"{SERVERS}/{created['id']}")).status_code == 204
    missing = await system.api.get(f"{SERVERS}/{created['id']}")
    assert missing.status_code == 404
    assert missing.json() == {
        "detail": f"Server not found: {created['id']}",
        "error_code": "SERVER_NOT_FOUND",
        "context": {"server_id": created["id"]},
    }
    db = system.backends.db
    assert await db.fetchval("SELECT count(*) FROM mcp.tools") == 0
    assert await db.fetchval("SELECT count(*) FROM mcp.server_connection_history") == 0
    # The name is free again.
    await system.register("gone", "STDIO", {"command": "true"}, auto_connect=False)
    for verb in ("connect", "disconnect", "tools/refresh"):
        assert (await system.api.post(f"{SERVERS}/{created['id']}/{verb}")).status_code == 404
    assert (await system.api.delete(f"{SERVERS}/{created['id']}")).status_code == 404


async def test_list_filters_and_pages(system: System) -> None:
    for i in range(3):
        await system.register(f"page-{i}", "STDIO", {"command": "true"}, auto_connect=False)
    page = (await system.api.get(SERVERS, params={"limit": 2, "offset": 1})).json()
    assert page["total"] == 3 and page["limit"] == 2 and page["offset"] == 1
    assert [s["name"] for s in page["servers"]] == ["page-1", "page-2"]
    assert (await system.api.get(SERVERS, params={"status": "CONNECTED"})).json()["total"] == 0
    assert (await system.api.get(SERVERS, params={"status": "DISCONNECTED"})).json()["total"] == 3


async def test_ec003_crashed_stdio_server_answers_503_then_is_reconnected(system: System) -> None:
    async with launch_peer("stdio", name="crashy") as peer:
        created = await system.register("crashy", "STDIO", peer.config)
        await system.wait_connected(created["id"])
        marker = f"{DEMO_SERVER} --transport stdio --name crashy"
        [first_pid] = processes_running(marker)
        with pytest.raises(ServerUnavailable) as raised:
            await ask_owner(
                system.backends.bus, created["id"], "call", CallToolRpc(tool="crash", timeout_seconds=10), timeout=15
            )
        assert raised.value.error_code == "SERVER_UNAVAILABLE"
        assert raised.value.context["in_progress"]["tool"] == "crash"

        async def reconnected() -> bool:
            history = await system.history(created["id"])
            return "ERROR" in history and history[-2:] == ["RECONNECT", "TOOLS_DISCOVERED"]

        await eventually(reconnected, timeout=30, what="the crashed server to be reconnected (EC-003)")
        rows = await system.api.get(f"{SERVERS}/{created['id']}/history")
        lost = next(e for e in rows.json() if e["event_type"] == "ERROR")
        assert lost["details"]["error_message"].startswith("Connection lost")
        assert (await system.server(created["id"]))["status"] == "CONNECTED"
        assert processes_running(marker) != [first_pid] and first_pid not in processes_running(marker)


async def test_ec004_stale_name_reservation_is_taken_over(system: System) -> None:
    """A gateway that died between reserving a name and registering must not block it forever."""
    names = await names_bucket(system.backends.js)
    stale = json.dumps({"server_id": "00000000-0000-4000-8000-000000000000", "at": time.time() - 3600})
    await names.create(name_key("default", "orphan-name"), stale.encode())
    await system.register("orphan-name", "STDIO", {"command": "true"}, auto_connect=False)
    fresh = json.dumps({"server_id": "00000000-0000-4000-8000-000000000001", "at": time.time()})
    await names.create(name_key("default", "in-flight"), fresh.encode())
    body = {"name": "in-flight", "transport_type": "STDIO", "connection_config": {"command": "true"}}
    assert (await system.api.post(SERVERS, json=body)).status_code == 409


async def test_malformed_connect_command_is_dropped_not_redelivered(nats_url: str, database_url: str) -> None:
    """A command that fails validation is terminated once; the ones behind it are still served."""
    # A long reconcile interval: only the connect command can bring the server up in time.
    async with running_system(nats_url, database_url, reconcile_interval_seconds=120) as system:
        js = system.backends.js
        await js.publish(ConnectServer.subject, b'{"not": "a command"}')
        async with launch_peer("stdio") as peer:
            created = await system.register("after-poison", "STDIO", peer.config)
            await system.wait_connected(created["id"], timeout=20)

        async def queue_empty() -> bool:
            info = await js.consumer_info(COMMANDS_STREAM, "session-workers")
            stream = await js.stream_info(COMMANDS_STREAM)
            return info.num_ack_pending == 0 and stream.state.messages == 0

        await eventually(queue_empty, timeout=10, what="the malformed command to leave the work queue")
