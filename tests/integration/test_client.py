"""``toolmesh.client`` over NATS and over HTTP against a running toolmesh: same results, same errors."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.harness import ADMIN_TOKEN, System
from tests.peers.launch import launch_peer
from toolmesh.client import ToolmeshClient, follow_events
from toolmesh.contracts.api_requests import ListServersRequest
from toolmesh.contracts.events import ToolsDiscovered
from toolmesh.contracts.keys import CreateKeyRequest
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.contracts.tools import ToolCallRequest
from toolmesh.errors import ServerNotFound, ToolNotFound, ValidationFailed
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.integration


@pytest.fixture(params=["nats", "http"])
async def client(request: pytest.FixtureRequest, system: System) -> AsyncIterator[ToolmeshClient]:
    if request.param == "nats":
        mesh = await ToolmeshClient.over_nats(system.settings.nats_url or "", ADMIN_TOKEN)
    else:
        mesh = ToolmeshClient.over_http(str(system.api.base_url), ADMIN_TOKEN)
    async with mesh:
        yield mesh


async def test_client_registers_calls_and_reads_with_typed_results(client: ToolmeshClient, system: System) -> None:
    async with launch_peer("stdio") as peer:
        body = RegisterServerRequest.model_validate(
            {"name": "demo", "transport_type": "STDIO", "connection_config": peer.config}
        )
    key = str(uuid.uuid4())
    created = await client.register(body, idempotency_key=key)
    assert (await client.register(body, idempotency_key=key)).id == created.id
    await system.wait_connected(created.id)

    result = await client.call_tool(ToolCallRequest(name="demo.add", arguments={"a": 2, "b": 3}))
    assert result.is_error is False and result.metadata.server_id == created.id
    assert result.content[0]["text"] in ("5", "5.0")
    listed = await client.list_servers(ListServersRequest(include_tools=True))
    assert [s.name for s in listed.servers] == ["demo"] and listed.servers[0].tools
    assert (await client.server(created.id)).status == "CONNECTED"
    assert "echo" in {t.original_name for t in (await client.tools(created.id)).tools}
    assert "CONNECTED" in {h.event_type for h in await client.history(created.id)}
    assert (await client.state()).connected_servers == 1

    with pytest.raises(ServerNotFound):
        await client.server(str(uuid.uuid4()))
    with pytest.raises(ToolNotFound):
        await client.call_tool(ToolCallRequest(name="demo.nothing"))
    made = await client.create_key(CreateKeyRequest(name="reader", namespace="elsewhere"))
    assert made.token and made.id in {k.id for k in (await client.keys()).keys}
    other = ToolmeshClient.over_http(str(system.api.base_url), made.token)
    async with other:
        with pytest.raises(ServerNotFound):
            await other.server(created.id)
    await client.revoke_key(made.id)
    await client.remove(created.id)
    assert (await client.list_servers()).total == 0


async def test_nats_client_takes_seed_urls_and_uses_one_that_answers(system: System) -> None:
    url = system.settings.nats_url or ""
    mesh = await ToolmeshClient.over_nats(f"nats://127.0.0.1:{free_port()}, {url}", ADMIN_TOKEN)  # nobody there
    try:
        assert (await mesh.list_servers(ListServersRequest())).total >= 0
    finally:
        await mesh.close()


async def test_http_client_reports_fastapi_validation_as_validation_failed(system: System) -> None:
    async with ToolmeshClient.over_http(str(system.api.base_url), ADMIN_TOKEN) as mesh:
        with pytest.raises(ValidationFailed):
            await mesh.request("servers.list", ListServersRequest.model_construct(limit=0))


async def test_follow_events_replays_from_a_sequence(system: System) -> None:
    async with launch_peer("stdio") as peer:
        created = await system.register("replayed", peer.transport_type, peer.config)
    await system.wait_connected(created["id"])

    async def first_snapshot() -> tuple[int, ToolsDiscovered]:
        async for seq, event in follow_events(system.backends.nc, start_sequence=1):
            if isinstance(event, ToolsDiscovered) and event.server_id == created["id"]:
                return seq, event
        raise AssertionError("the stream ended")

    seq, event = await asyncio.wait_for(first_snapshot(), 20)
    assert seq > 1 and event.server_name == "replayed" and event.schema_version == 1

    async def from_there() -> int:
        async for again, _ in follow_events(system.backends.nc, start_sequence=seq):
            return again
        raise AssertionError("the stream ended")

    assert await asyncio.wait_for(from_there(), 20) == seq
