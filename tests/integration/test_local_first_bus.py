"""``LocalFirstBus``: a request to a subject this process owns skips NATS, from another process it goes
over NATS; an owner that does not answer in time, a request over the payload limit and the
requester's context vars meet the owner the same way on both paths; with NATS down a request fails
as between processes while a cancel still reaches a local owner; a second owner that takes the
subjects over before the first lets go gets the work, and keeps it when the first leaves."""

from __future__ import annotations

import contextvars
import json
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.errors import ConnectionClosedError, MaxPayloadError
from nats.errors import TimeoutError as NatsTimeout

from tests.harness import eventually
from toolmesh.contracts.clients import client_id
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.interface import Message
from toolmesh.platform.bus.local_first import LocalFirstBus
from toolmesh.platform.bus.nats_bus import NatsBus
from toolmesh.platform.bus.requests import NoOwner, ok_reply, request_owner, tell_owner

pytestmark = pytest.mark.integration


@pytest.fixture
async def bus(nc: NATS) -> AsyncIterator[LocalFirstBus]:
    """The bus of a process on ``nc``."""
    local_first = LocalFirstBus(NatsBus(nc))
    yield local_first
    await local_first.close()


async def test_a_request_to_an_owner_in_the_same_process_skips_nats(nats_url: str, bus: LocalFirstBus) -> None:
    other_nc, spy_nc = [await nats.connect(nats_url) for _ in range(2)]
    server_id = str(uuid.uuid4())
    seen_on_nats: list[str] = []
    answered: list[str] = []

    async def owner(msg: Message) -> None:
        answered.append(msg.subject.rsplit(".", 1)[-1])
        if msg.reply:
            await msg.respond(ok_reply(json.dumps({"echo": json.loads(msg.data)}).encode()))

    async def spy(msg: Message) -> None:
        seen_on_nats.append(msg.subject)

    try:
        await bus.subscribe(verbs.RPC.wildcard(server_id), owner, owned=True)
        await spy_nc.subscribe(verbs.RPC.wildcard(server_id), cb=spy)
        await spy_nc.flush()

        assert await request_owner(bus, server_id, "call", b'"local"', timeout=5) == {"echo": "local"}
        assert await request_owner(NatsBus(other_nc), server_id, "call", b'"remote"', timeout=5) == {"echo": "remote"}
        await eventually(lambda: seen_on_nats, timeout=10, what="the remote request on NATS")
        await spy_nc.flush()
        assert seen_on_nats == [f"toolmesh.rpc.{server_id}.call"]  # only the one from another process
        assert answered == ["call", "call"]
    finally:
        for connection in (other_nc, spy_nc):
            await connection.close()


async def test_a_local_owner_that_does_not_answer_times_out_like_a_remote_one(bus: LocalFirstBus) -> None:
    server_id = str(uuid.uuid4())
    held: list[Message] = []

    async def silent(msg: Message) -> None:
        held.append(msg)

    sub = await bus.subscribe(verbs.RPC.wildcard(server_id), silent, owned=True)
    with pytest.raises(NatsTimeout):
        await request_owner(bus, server_id, "call", b"{}", timeout=0.2)
    assert len(held) == 1
    await held[0].respond(b"{}")  # a late answer to a requester that gave up is dropped
    await sub.unsubscribe()
    with pytest.raises(NoOwner):
        await request_owner(bus, server_id, "call", b"{}", timeout=5)


REQUESTER = contextvars.ContextVar[str]("requester", default="none")


async def test_a_local_owner_sees_neither_the_requesters_context_nor_an_oversized_request(
    bus: LocalFirstBus,
) -> None:
    server_id = str(uuid.uuid4())
    seen: list[str] = []

    async def owner(msg: Message) -> None:
        seen.append(REQUESTER.get())
        await msg.respond(ok_reply(b"{}"))

    await bus.subscribe(verbs.RPC.wildcard(server_id), owner, owned=True)
    token = REQUESTER.set("gateway")
    try:
        assert await request_owner(bus, server_id, "call", b"{}", timeout=5) == {}
        assert seen == ["none"]  # as a subscription callback would run: not in the caller's context
        with pytest.raises(MaxPayloadError):
            await request_owner(bus, server_id, "call", b"x" * (bus.max_payload + 1), timeout=5)
        assert seen == ["none"]
    finally:
        REQUESTER.reset(token)


async def test_with_nats_down_a_request_fails_but_a_cancel_reaches_a_local_owner(nc: NATS, bus: LocalFirstBus) -> None:
    server_id = str(uuid.uuid4())
    told: list[str] = []

    async def owner(msg: Message) -> None:
        told.append(msg.subject.rsplit(".", 1)[-1])
        if msg.reply:
            await msg.respond(ok_reply(b"{}"))

    await bus.subscribe(verbs.RPC.wildcard(server_id), owner, owned=True)
    await nc.close()  # publishing on it would raise: the cancel must not need it
    with pytest.raises(ConnectionClosedError):  # as from another process
        await request_owner(bus, server_id, "call", b"{}", timeout=5)
    await tell_owner(bus, server_id, "cancel", b"{}")
    await eventually(lambda: told, timeout=10, what="the cancel")
    assert told == ["cancel"]


async def test_a_second_owner_takes_over_before_the_first_lets_go(bus: LocalFirstBus) -> None:
    server_id = str(uuid.uuid4())

    async def first(msg: Message) -> None:
        await msg.respond(ok_reply(b'"first"'))

    async def second(msg: Message) -> None:
        await msg.respond(ok_reply(b'"second"'))

    subject = verbs.RPC.wildcard(server_id)
    first_sub = await bus.subscribe(subject, first, owned=True)
    await bus.subscribe(subject, second, owned=True)  # taken over before the first let go
    assert await request_owner(bus, server_id, "call", b"{}", timeout=5) == "second"
    await first_sub.unsubscribe()
    assert await request_owner(bus, server_id, "call", b"{}", timeout=5) == "second"


async def test_server_to_client_traffic_to_a_replica_in_the_process_skips_nats(bus: LocalFirstBus) -> None:
    replica = uuid.uuid4().hex
    got: list[tuple[str, bytes]] = []

    async def client_side(msg: Message) -> None:
        got.append((msg.subject.rsplit(".", 1)[-1], msg.data))
        if msg.reply:
            await msg.respond(b"answered")

    await bus.subscribe(verbs.CLIENT.wildcard(replica), client_side, owned=True)
    client = client_id(replica, "session1")
    assert await bus.request(verbs.CLIENT_REQUEST.subject(client), b"ask", timeout=5) == b"answered"
    await bus.remote.nc.close()
    await bus.publish(verbs.CLIENT_NOTIFY.subject(client), b"note")  # needs no connection
    await eventually(lambda: len(got) == 2, timeout=10, what="the notification")
    assert got == [("request", b"ask"), ("notify", b"note")]
