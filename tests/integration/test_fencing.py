"""Fencing tokens: an owner stamps its replies with its lease's token (its claim's revision), and a
requester refuses the late reply of an owner deposed since (a lower token than it has seen)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from tests.harness import System, eventually
from tests.peers.launch import launch_peer
from toolmesh.contracts.rpc import CallToolRpc, PingRpc, PingRpcResult
from toolmesh.errors import ServerUnavailable
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.dispatch import Dispatcher
from toolmesh.platform.bus.fencing import Fences
from toolmesh.platform.bus.interface import Bus
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.nats_bus import NatsBus
from toolmesh.platform.bus.requests import request_owner
from toolmesh.platform.bus.topology import leases_bucket

pytestmark = pytest.mark.integration


async def _fence_of(bus: Bus, server_id: str) -> int:
    """The token on the owner's reply to a ping."""
    raw = await bus.request(verbs.PING.subject(server_id), PingRpc().model_dump_json().encode(), timeout=10)
    token: int = json.loads(raw)["fence"]
    return token


async def test_a_reply_stamped_with_a_lower_token_than_seen_is_refused(nc: NATS) -> None:
    bus, server_id, fences = NatsBus(nc), f"fenced-{uuid.uuid4().hex}", Fences()
    stamp = {"token": 7}

    async def pong(key: str, body: PingRpc) -> PingRpcResult:
        return PingRpcResult(response_time_ms=1.0)

    owner = Dispatcher(verbs.RPC, {verbs.PING: pong}, span_name="owner", fence=lambda: stamp["token"])
    sub = await bus.subscribe(verbs.RPC.wildcard(server_id), owner.dispatch)

    async def ping() -> dict[str, Any]:
        payload = PingRpc().model_dump_json().encode()
        return await request_owner(bus, server_id, "ping", payload, timeout=10, fences=fences)

    try:
        assert (await ping())["response_time_ms"] == 1.0
        stamp["token"] = 5  # the late reply of the owner before
        with pytest.raises(ServerUnavailable) as refused:
            await ping()
        assert refused.value.status == 503 and refused.value.error_code == "SERVER_UNAVAILABLE"
        stamp["token"] = 9  # the owner after
        assert (await ping())["response_time_ms"] == 1.0
    finally:
        await sub.unsubscribe()


async def test_the_owner_stamps_its_claims_revision_however_often_it_renews(system: System) -> None:
    async with launch_peer("stdio") as peer:
        server_id = (await system.register("demo", peer.transport_type, peer.config))["id"]
    await system.wait_connected(server_id)
    token = await _fence_of(system.backends.bus, server_id)
    kv = await leases_bucket(system.backends.js, system.settings.lease_ttl_seconds)
    assert await LeaseTable(kv, "observer").holder_of(server_id) == system.backends.process_id
    entry = await kv.get(server_id)
    assert entry.revision is not None and entry.revision >= token

    async def renewed() -> bool:
        later = await kv.get(server_id)
        return later.revision is not None and later.revision > token

    await eventually(renewed, what="a renewal of the lease")
    assert await _fence_of(system.backends.bus, server_id) == token


async def test_the_gateway_answers_503_to_a_call_replied_by_a_deposed_owner(system: System) -> None:
    async with launch_peer("stdio") as peer:
        server_id = (await system.register("demo", peer.transport_type, peer.config))["id"]
    await system.wait_connected(server_id)
    call = {"name": "demo.echo", "arguments": {"text": "hi"}}
    assert (await system.api.post("/api/v1/tools/call", json=call)).status_code == 200
    token = await _fence_of(system.backends.bus, server_id)

    async def late(key: str, body: CallToolRpc) -> bytes:
        return b'{"content":[{"type":"text","text":"late"}],"isError":false}'

    # An owner deposed before the current one claimed: the newest in-process owner gets the call.
    deposed = Dispatcher(verbs.RPC, {verbs.CALL: late}, span_name="deposed", fence=lambda: token - 1)
    sub = await system.backends.bus.subscribe(verbs.RPC.wildcard(server_id), deposed.dispatch, owned=True)
    try:
        refused = await system.api.post("/api/v1/tools/call", json=call)
    finally:
        await sub.unsubscribe()
    assert refused.status_code == 503, refused.text
    assert refused.json()["error_code"] == "SERVER_UNAVAILABLE"
    assert (await system.api.post("/api/v1/tools/call", json=call)).status_code == 200
