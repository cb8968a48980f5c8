"""Fencing tokens: an owner stamps its replies with its lease's token (its claim's revision), and a
requester refuses the late reply of an owner deposed since (a lower token than it has seen)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

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


class StampingOwner:
    """An owner of a server answering pings stamped with ``token``, and a requester checking the stamps."""

    def __init__(self, nc: NATS, server_id: str) -> None:
        self.bus, self.server_id, self.fences = NatsBus(nc), server_id, Fences(nc.jetstream())
        self.token: int | None = None

    async def ping(self) -> float:
        payload = PingRpc().model_dump_json().encode()
        result = await request_owner(self.bus, self.server_id, "ping", payload, timeout=10, fences=self.fences)
        return float(result["response_time_ms"])

    @contextlib.asynccontextmanager
    async def answering(self) -> AsyncIterator[StampingOwner]:
        async def pong(key: str, body: PingRpc) -> PingRpcResult:
            return PingRpcResult(response_time_ms=1.0)

        owner = Dispatcher(verbs.RPC, {verbs.PING: pong}, span_name="owner", fence=lambda: self.token)
        sub = await self.bus.subscribe(verbs.RPC.wildcard(self.server_id), owner.dispatch)
        try:
            yield self
        finally:
            await sub.unsubscribe()


async def test_a_reply_stamped_with_a_lower_token_than_seen_is_refused(nc: NATS) -> None:
    server_id = f"fenced-{uuid.uuid4().hex}"
    kv = await leases_bucket(nc.jetstream(), 30)
    before, after = LeaseTable(kv, "before"), LeaseTable(kv, "after")
    assert await before.claim(server_id)
    async with StampingOwner(nc, server_id).answering() as owner:
        owner.token = before.token(server_id)
        assert await owner.ping() == 1.0
        await before.release(server_id)
        assert await after.claim(server_id) and await after.renew(server_id)  # its token is no longer its revision
        late, owner.token = owner.token, after.token(server_id)
        assert await owner.ping() == 1.0
        owner.token = late  # the late reply of the owner before
        with pytest.raises(ServerUnavailable) as refused:
            await owner.ping()
        assert refused.value.status == 503 and refused.value.error_code == "SERVER_UNAVAILABLE"


@pytest.mark.parametrize(
    ("forged", "refused"),
    [
        ("4611686018427387904", True),
        ("-1", False),
        ("0", False),
        ('"99999999"', False),
        ("1e18", False),
        ("true", False),
        ("null", False),
    ],
)
async def test_a_reply_with_a_forged_token_does_not_move_the_fence(nc: NATS, forged: str, refused: bool) -> None:
    """A token above the lease in force is refused; one that is no positive integer is no token at all."""
    bus, server_id, fences = NatsBus(nc), f"forged-{uuid.uuid4().hex}", Fences(nc.jetstream())
    leases = LeaseTable(await leases_bucket(nc.jetstream(), 30), "owner")
    assert await leases.claim(server_id) and await leases.renew(server_id)
    fence = {"token": str(leases.token(server_id)).encode()}

    async def answer(msg: Msg) -> None:
        await msg.respond(b'{"ok":true,"result":{"response_time_ms":1.0},"fence":%s}' % fence["token"])

    sub = await nc.subscribe(verbs.PING.subject(server_id), cb=answer)

    async def ping() -> dict[str, Any]:
        payload = PingRpc().model_dump_json().encode()
        return await request_owner(bus, server_id, "ping", payload, timeout=10, fences=fences)

    try:
        real = fence["token"]
        assert (await ping())["response_time_ms"] == 1.0
        fence["token"] = forged.encode()
        if refused:
            with pytest.raises(ServerUnavailable):
                await ping()
        else:
            assert (await ping())["response_time_ms"] == 1.0
        fence["token"] = real
        assert (await ping())["response_time_ms"] == 1.0
    finally:
        await sub.unsubscribe()


async def test_a_lease_an_earlier_version_renewed_is_taken_without_moving_the_fence(nc: NATS) -> None:
    """An earlier version's renewal did not record the token: replies are taken, the fence stays, until
    the holder claims again."""
    server_id = f"earlier-{uuid.uuid4().hex}"
    kv = await leases_bucket(nc.jetstream(), 30)
    leases = LeaseTable(kv, "owner")
    assert await leases.claim(server_id)
    token = leases.token(server_id)
    assert token is not None
    await kv.update(server_id, b"owner", last=token)  # renewed as an earlier version did
    async with StampingOwner(nc, server_id).answering() as owner:
        owner.token = token + 1000
        assert await owner.ping() == 1.0
        owner.token = token
        assert await owner.ping() == 1.0  # the fence did not move to the unconfirmed token


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


@pytest.mark.parametrize(
    "stamp",
    [lambda token: token - 1, lambda token: 2**62],
    ids=["deposed-owner", "forged-token-above-the-lease"],
)
async def test_the_gateway_answers_503_to_a_reply_not_of_the_lease_in_force(
    system: System, stamp: Callable[[int], int]
) -> None:
    """A late reply of an owner deposed before the current one claimed, or one stamped with a token no
    claim of the server ever had (anyone able to answer on the bus): refused, and the owner's next
    reply is taken."""
    async with launch_peer("stdio") as peer:
        server_id = (await system.register("demo", peer.transport_type, peer.config))["id"]
    await system.wait_connected(server_id)
    call = {"name": "demo.echo", "arguments": {"text": "hi"}}
    assert (await system.api.post("/api/v1/tools/call", json=call)).status_code == 200
    token = await _fence_of(system.backends.bus, server_id)

    async def other(key: str, body: CallToolRpc) -> bytes:
        return b'{"content":[{"type":"text","text":"not the owner"}],"isError":false}'

    # The newest in-process subscriber of the server gets the call.
    replier = Dispatcher(verbs.RPC, {verbs.CALL: other}, span_name="other", fence=lambda: stamp(token))
    sub = await system.backends.bus.subscribe(verbs.RPC.wildcard(server_id), replier.dispatch, owned=True)
    try:
        refused = await system.api.post("/api/v1/tools/call", json=call)
    finally:
        await sub.unsubscribe()
    assert refused.status_code == 503, refused.text
    assert refused.json()["error_code"] == "SERVER_UNAVAILABLE"
    served = await system.api.post("/api/v1/tools/call", json=call)
    assert served.status_code == 200, served.text
    assert served.json()["content"][0]["text"] != "not the owner"
