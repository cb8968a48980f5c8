"""Endpoints (bundles) at ``/mcp/{name}``: a selection of tools (renamed, re-described, disabled) from
several servers, keys limited to endpoints, and changes announced to connected clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import mcp_types
import pytest

from tests.harness import System, eventually, running_system
from tests.mcp_client import Received, mcp_session, text_of
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
DEV = {
    "name": "dev",
    "description": "What the coding agent may use",
    "include": ["alpha.*", "beta.add"],
    "exclude": ["alpha.crash"],
    "overrides": {
        "alpha.echo": {"name": "say", "description": "Say the text back"},
        "alpha.slow": {"enabled": False},
    },
}


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url) as system, launch_peer("stdio") as peer:
        for name in ("alpha", "beta"):
            created = await system.register(name, peer.transport_type, peer.config)
            await system.wait_connected(created["id"])
        yield system


async def create_endpoint(system: System, body: dict[str, Any]) -> dict[str, Any]:
    response = await system.api.post("/api/v1/endpoints", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def listed(session: Any) -> dict[str, mcp_types.Tool]:
    return {t.name: t for t in (await session.list_tools()).tools}


async def test_a_bundle_selects_renames_and_disables_tools_of_several_servers(system: System) -> None:
    created = await create_endpoint(system, DEV)
    assert created["path"] == "/mcp/dev" and created["namespace"] == "default"
    async with mcp_session(system, path="/mcp/dev") as session:
        tools = await listed(session)
        assert "say" in tools and tools["say"].description == "Say the text back"
        assert {"alpha__add", "beta__add"} <= tools.keys()
        assert not {"alpha__echo", "alpha__crash", "alpha__slow", "beta__echo"} & tools.keys()
        said = await session.call_tool("say", {"text": "through the bundle"})
        assert said.is_error is False and text_of(said) == "through the bundle"
        assert said.meta is not None and said.meta["toolmesh/metadata"]["routed_to"] == "alpha"
        outside = await session.call_tool("beta__echo", {"text": "x"})
        assert outside.is_error is True and "TOOL_NOT_FOUND" in text_of(outside)
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        assert prompts == {"alpha__greet"}  # alpha.* selects alpha's prompt; beta has only beta.add
    async with mcp_session(system, path="/mcp/dev", mode="search") as session:
        call = await session.call_tool("call_tool", {"name": "beta.echo", "arguments": {"text": "x"}})
        assert call.is_error is True and "TOOL_NOT_FOUND" in text_of(call)
        packs = await session.call_tool("run", {"code": "beta.add(a=1, b=2)"})
        assert "TOOL_NOT_FOUND" not in text_of(packs) and '"result": 3.0' in text_of(packs)


async def test_a_key_limited_to_a_bundle_reaches_nothing_else(system: System) -> None:
    await create_endpoint(system, DEV)
    key = await system.create_key("agent", "user", endpoints=["dev"])
    assert key["endpoints"] == ["dev"]
    token = key["token"]
    async with mcp_session(system, path="/mcp/dev", token=token) as session:
        tools = await listed(session)
        assert "say" in tools and "beta__echo" not in tools
        outside = await session.call_tool("beta__echo", {"text": "x"})
        assert outside.is_error is True
    base = str(system.api.base_url)
    headers = {"Authorization": f"Bearer {token}", **MCP_ACCEPT}
    async with httpx.AsyncClient(base_url=base, headers=headers) as client:
        for path in ("/mcp", "/mcp/alpha"):
            refused = await client.post(path, json=INITIALIZE)
            assert refused.status_code == 403 and refused.json()["error_code"] == "FORBIDDEN", path
        rest = await client.post("/api/v1/tools/call", json={"name": "beta.echo", "arguments": {"text": "x"}})
        assert rest.status_code == 403
        assert (await client.get("/api/v1/aggregator/servers")).status_code == 403


async def test_changing_a_bundle_tells_connected_clients(system: System) -> None:
    created = await create_endpoint(system, DEV)
    received = Received()
    async with mcp_session(system, path="/mcp/dev", received=received) as session:
        assert "beta__echo" not in await listed(session)
        await received.standalone_opened()  # a list_changed sent before it would be dropped
        changed = {**DEV, "include": ["alpha.*", "beta.*"]}
        response = await system.api.put(f"/api/v1/endpoints/{created['id']}", json=changed)
        assert response.status_code == 200 and response.json()["include"] == ["alpha.*", "beta.*"]

        async def announced() -> bool:
            return received.tools_changed() > 0

        await eventually(announced, timeout=10, what="tools/list_changed")
        assert "beta__echo" in await listed(session)
    assert (await system.api.delete(f"/api/v1/endpoints/{created['id']}")).status_code == 204
    assert (await system.api.get(f"/api/v1/endpoints/{created['id']}")).status_code == 404


async def test_endpoint_and_server_names_do_not_collide(system: System) -> None:
    clash = await system.api.post("/api/v1/endpoints", json={**DEV, "name": "alpha"})
    assert clash.status_code == 409 and clash.json()["error_code"] == "ENDPOINT_ALREADY_EXISTS"
    await create_endpoint(system, DEV)
    again = await system.api.post("/api/v1/endpoints", json=DEV)
    assert again.status_code == 409
    server = await system.api.post(
        "/api/v1/aggregator/servers",
        json={"name": "dev", "transport_type": "STDIO", "connection_config": {"command": "true"}},
    )
    assert server.status_code == 409 and server.json()["error_code"] == "SERVER_ALREADY_EXISTS"
    bad = await system.api.post("/api/v1/endpoints", json={**DEV, "name": "other", "overrides": {"echo": {}}})
    assert bad.status_code == 422


async def test_another_namespace_cannot_see_or_use_the_bundle(system: System) -> None:
    created = await create_endpoint(system, DEV)
    key = await system.create_key("b", "admin", namespace="team-b")
    headers = {"Authorization": f"Bearer {key['token']}"}
    assert (await system.api.get(f"/api/v1/endpoints/{created['id']}", headers=headers)).status_code == 404
    assert (await system.api.get("/api/v1/endpoints", headers=headers)).json()["total"] == 0
    assert (await system.api.delete(f"/api/v1/endpoints/{created['id']}", headers=headers)).status_code == 404
    hidden = await system.api.post("/mcp/dev", json=INITIALIZE, headers={**headers, **MCP_ACCEPT})
    assert hidden.status_code == 404


async def test_an_id_that_is_not_a_uuid_is_not_found(system: System) -> None:
    """An endpoint's or a server's id that is no UUID reads as unknown (404 with its error code), not
    as a database error."""
    for path, code in (
        ("/api/v1/endpoints/not-a-uuid", "ENDPOINT_NOT_FOUND"),
        ("/api/v1/aggregator/servers/not-a-uuid", "SERVER_NOT_FOUND"),
    ):
        response = await system.api.get(path)
        assert response.status_code == 404, response.text
        assert response.json()["error_code"] == code
