"""``POST /api/v1/tools/call`` against real MCP peers: routing (BR-005), errors, EC-002/003/007."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.peers.launch import launch_peer
from toolmesh.contracts.events import DiscoveredTool, ServerStatusChanged, ToolsDiscovered
from toolmesh.lifecycle import ServerStatus
from toolmesh.platform.bus.publishing import publish_event

pytestmark = pytest.mark.integration
CALL = "/api/v1/tools/call"
SERVERS = "/api/v1/aggregator/servers"
STRICT_SERVER = Path(__file__).parents[1] / "peers" / "strict_server.py"


@dataclass
class Demo:
    system: System
    server_id: str

    async def call(self, name: str, arguments: dict[str, Any] | None = None, **fields: Any) -> httpx.Response:
        return await self.system.api.post(CALL, json={"name": name, "arguments": arguments or {}, **fields})

    async def stats(self) -> dict[str, int]:
        response = await self.call("demo.stats")
        assert response.status_code == 200, response.text
        result: dict[str, int] = response.json()["structuredContent"]
        return result


async def connected_demo(system: System, name: str = "demo") -> str:
    async with launch_peer("stdio") as peer:
        created = await system.register(name, peer.transport_type, peer.config)
    await system.wait_connected(created["id"])
    return str(created["id"])


@pytest.fixture
async def demo(nats_url: str, database_url: str) -> AsyncIterator[Demo]:
    async with running_system(nats_url, database_url) as system:
        yield Demo(system, await connected_demo(system))


async def test_br005_namespaced_original_and_explicit_names_route_with_metadata(demo: Demo) -> None:
    for name, extra in (
        ("demo.echo", {}),
        ("echo", {}),
        ("echo", {"server_id": demo.server_id}),
        ("demo.echo", {"server_id": demo.server_id}),
    ):
        response = await demo.call(name, {"text": "hello"}, **extra)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["content"] == [{"type": "text", "text": "hello"}]
        assert body["isError"] is False
        metadata = body["metadata"]
        assert metadata["routed_to"] == "demo" and metadata["server_id"] == demo.server_id
        for field in ("routing_time_ms", "execution_time_ms", "total_time_ms"):
            assert isinstance(metadata[field], float) and metadata[field] >= 0
        assert metadata["total_time_ms"] >= metadata["execution_time_ms"]
        assert "warning" not in metadata
    added = (await demo.call("demo.add", {"a": 2, "b": 3})).json()
    assert added["structuredContent"] == {"result": 5.0}


async def test_br005_unknown_tool_and_server_are_404(demo: Demo) -> None:
    for name in ("nope", "demo.nope", "nowhere.echo"):
        response = await demo.call(name)
        assert response.status_code == 404, response.text
        assert response.json()["error_code"] == "TOOL_NOT_FOUND"
        assert response.json()["context"] == {"tool": name}
    missing = str(uuid.uuid4())
    response = await demo.call("echo", {"text": "x"}, server_id=missing)
    assert response.status_code == 404
    assert response.json() == {
        "detail": f"Server not found: {missing}",
        "error_code": "SERVER_NOT_FOUND",
        "context": {"server_id": missing},
    }


async def test_br005_original_name_on_two_servers_is_ambiguous(demo: Demo) -> None:
    other_id = await connected_demo(demo.system, "other")
    response = await demo.call("echo", {"text": "x"})
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error_code"] == "TOOL_AMBIGUOUS"
    assert body["context"]["servers"] == [
        {"id": demo.server_id, "name": "demo", "namespace": "default"},
        {"id": other_id, "name": "other", "namespace": "default"},
    ]
    # Either way of naming the server still works.
    assert (await demo.call("other.echo", {"text": "x"})).json()["metadata"]["routed_to"] == "other"
    assert (await demo.call("echo", {"text": "x"}, server_id=other_id)).json()["metadata"]["server_id"] == other_id


async def test_br005_disconnected_server_is_503_with_server_info(demo: Demo) -> None:
    response = await demo.system.api.post(f"{SERVERS}/{demo.server_id}/disconnect")
    assert response.json()["status"] == "DISCONNECTED", response.text
    response = await demo.call("demo.echo", {"text": "x"})
    assert response.status_code == 503
    assert response.json() == {
        "detail": "Server unavailable: demo",
        "error_code": "SERVER_UNAVAILABLE",
        "server": {"id": demo.server_id, "name": "demo", "status": "DISCONNECTED"},
    }


async def test_br005_degraded_server_executes_with_warning(demo: Demo) -> None:
    await publish_event(
        demo.system.backends.js,
        ServerStatusChanged(
            server_id=demo.server_id,
            status=ServerStatus.DEGRADED,
            previous_status=ServerStatus.CONNECTED,
            history="DEGRADED",
        ),
    )

    async def warned() -> dict[str, Any] | None:
        body: dict[str, Any] = (await demo.call("demo.echo", {"text": "still"})).json()
        return body if "warning" in body["metadata"] else None

    body = await eventually(warned, timeout=10, what="a DEGRADED warning")
    assert body["content"][0]["text"] == "still" and body["isError"] is False
    assert "DEGRADED" in body["metadata"]["warning"]


async def test_tool_error_result_is_forwarded_as_200(demo: Demo) -> None:
    response = await demo.call("demo.fail", {"message": "boom"})
    assert response.status_code == 200
    body = response.json()
    assert body["isError"] is True and body["content"][0]["text"].endswith("boom")
    assert body["metadata"]["routed_to"] == "demo"


async def test_timeout_is_504_and_cancels_the_upstream_call(demo: Demo) -> None:
    before = await demo.stats()
    response = await demo.call("demo.slow", {"seconds": 30}, timeout_seconds=0.5)
    assert response.status_code == 504, response.text
    assert response.json()["error_code"] == "EXECUTION_TIMEOUT"

    async def cancelled() -> dict[str, int] | None:
        stats = await demo.stats()
        return stats if stats["slow_cancelled"] == before["slow_cancelled"] + 1 else None

    stats = await eventually(cancelled, timeout=10, what="the upstream to see the cancellation")
    assert stats["slow_started"] == before["slow_started"] + 1 and stats["slow_completed"] == before["slow_completed"]


async def test_client_disconnect_cancels_the_upstream_call(demo: Demo) -> None:
    before = await demo.stats()
    base = str(demo.system.api.base_url)
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        pending = asyncio.create_task(client.post(CALL, json={"name": "demo.slow", "arguments": {"seconds": 30}}))

        async def started() -> bool:
            return (await demo.stats())["slow_started"] == before["slow_started"] + 1

        await eventually(started, timeout=10, what="the slow call to start upstream")
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending

    async def cancelled() -> dict[str, int] | None:
        stats = await demo.stats()
        return stats if stats["slow_cancelled"] == before["slow_cancelled"] + 1 else None

    stats = await eventually(cancelled, timeout=10, what="the upstream to see the cancellation")
    assert stats["slow_completed"] == before["slow_completed"]


async def test_ec003_upstream_crash_mid_call_is_503_with_what_was_in_progress(demo: Demo) -> None:
    response = await demo.call("demo.crash")
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["error_code"] == "SERVER_UNAVAILABLE"
    assert body["context"]["in_progress"] == {"tool": "crash", "arguments": []}
    assert body["server"]["id"] == demo.server_id and body["server"]["name"] == "demo"


async def test_ec007_concurrent_calls_get_their_own_results(demo: Demo) -> None:
    responses = await asyncio.gather(*(demo.call("demo.echo", {"text": f"call-{i}"}) for i in range(200)))
    assert [r.status_code for r in responses] == [200] * 200
    assert [r.json()["content"][0]["text"] for r in responses] == [f"call-{i}" for i in range(200)]


async def test_ec002_dotted_tool_name_routes_on_first_dot(demo: Demo) -> None:
    response = await demo.call("demo.add_tool", {"name": "api.v2.create"})
    assert response.json()["content"][0]["text"] == "added api.v2.create"

    async def created() -> dict[str, Any] | None:
        response = await demo.call("demo.api.v2.create")
        return response.json() if response.status_code == 200 else None

    body = await eventually(created, timeout=15, what="the dotted tool to be routable")
    assert body["content"][0]["text"] == "api.v2.create ok"
    # A dotted name is only ever server.tool: the bare original name is read as server "api", not found.
    assert (await demo.call("api.v2.create")).json()["error_code"] == "TOOL_NOT_FOUND"


async def test_protocol_error_upstream_is_502(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url) as system:
        config = {"command": sys.executable, "args": [str(STRICT_SERVER)]}
        created = await system.register("strict", "STDIO", config)
        await system.wait_connected(created["id"])
        response = await system.api.post(CALL, json={"name": "reject", "server_id": created["id"]})
        assert response.status_code == 502, response.text
        body = response.json()
        assert body["error_code"] == "EXECUTION_FAILED" and "Rejected: this server refuses" in body["detail"]
        assert body["context"]["upstream_code"] == -32602


async def test_session_not_found_when_no_worker_holds_the_session(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        created = await system.register("orphan", "STDIO", {"command": "true"}, auto_connect=False)
        server_id = created["id"]
        for previous, status in ((ServerStatus.DISCONNECTED, ServerStatus.CONNECTING), (None, ServerStatus.CONNECTED)):
            event = ServerStatusChanged(
                server_id=server_id, status=status, previous_status=previous or ServerStatus.CONNECTING, history="TEST"
            )
            await publish_event(system.backends.js, event)
        tools = ToolsDiscovered(server_id=server_id, server_name="orphan", tools=[DiscoveredTool(original_name="echo")])
        await publish_event(system.backends.js, tools)
        await system.wait_connected(server_id)
        response = await system.api.post(CALL, json={"name": "orphan.echo", "arguments": {"text": "x"}})
        assert response.status_code == 503, response.text
        body = response.json()
        assert body["error_code"] == "SESSION_NOT_FOUND"
        assert body["server"] == {"id": server_id, "name": "orphan", "status": "CONNECTED"}
