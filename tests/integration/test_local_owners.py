"""Requests to a server's owner in the same process skip NATS; from another connection they go over
it; an owner that does not answer in time, a request over the payload limit and the requester's
context vars meet the owner the same way on both paths; a cancel reaches a local owner while NATS is down."""

from __future__ import annotations

import contextvars
import json
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import MaxPayloadError
from nats.errors import TimeoutError as NatsTimeout

from tests.harness import eventually
from toolmesh.bus import local_owners, verbs
from toolmesh.bus.local_owners import OwnerRequest
from toolmesh.bus.requests import ok_reply, request_owner, tell_owner

pytestmark = pytest.mark.integration


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[NATS]:
    """A connection of its own (closed after the test, if the test did not close it)."""
    connection = await nats.connect(nats_url)
    yield connection
    await connection.close()


async def test_a_request_to_an_owner_on_the_same_connection_skips_the_bus(nats_url: str) -> None:
    owner_nc, other_nc, spy_nc = [await nats.connect(nats_url) for _ in range(3)]
    server_id = str(uuid.uuid4())
    seen_on_bus: list[str] = []
    answered: list[str] = []

    async def owner(msg: OwnerRequest) -> None:
        answered.append(msg.subject.rsplit(".", 1)[-1])
        if msg.reply:
            await msg.respond(ok_reply(json.dumps({"echo": json.loads(msg.data)}).encode()))

    async def spy(msg: Msg) -> None:
        seen_on_bus.append(msg.subject)

    try:
        await owner_nc.subscribe(verbs.RPC.wildcard(server_id), cb=owner)
        local_owners.register(owner_nc, server_id, owner)
        await spy_nc.subscribe(verbs.RPC.wildcard(server_id), cb=spy)
        await owner_nc.flush()
        await spy_nc.flush()

        local = await request_owner(owner_nc, server_id, "call", b'"local"', timeout=5)
        assert local == {"echo": "local"}
        remote = await request_owner(other_nc, server_id, "call", b'"remote"', timeout=5)
        assert remote == {"echo": "remote"}
        await eventually(lambda: seen_on_bus, timeout=10, what="the remote request on the bus")
        await spy_nc.flush()
        assert seen_on_bus == [f"toolmesh.rpc.{server_id}.call"]  # only the one from another connection
        assert answered == ["call", "call"]
    finally:
        local_owners.unregister(owner_nc, server_id, owner)
        for nc in (owner_nc, other_nc, spy_nc):
            await nc.close()


async def test_a_local_owner_that_does_not_answer_times_out_like_a_remote_one(nc: NATS) -> None:
    server_id = str(uuid.uuid4())
    held: list[OwnerRequest] = []

    async def silent(msg: OwnerRequest) -> None:
        held.append(msg)

    local_owners.register(nc, server_id, silent)
    with pytest.raises(NatsTimeout):
        await request_owner(nc, server_id, "call", b"{}", timeout=0.2)
    assert len(held) == 1
    await held[0].respond(b"{}")  # a late answer to a requester that gave up is dropped
    local_owners.unregister(nc, server_id, silent)
    assert not local_owners.is_local(nc, server_id)


REQUESTER = contextvars.ContextVar[str]("requester", default="none")


async def test_a_local_owner_sees_neither_the_requesters_context_nor_an_oversized_request(nc: NATS) -> None:
    server_id = str(uuid.uuid4())
    seen: list[str] = []

    async def owner(msg: OwnerRequest) -> None:
        seen.append(REQUESTER.get())
        await msg.respond(ok_reply(b"{}"))

    try:
        local_owners.register(nc, server_id, owner)
        REQUESTER.set("gateway")
        assert await request_owner(nc, server_id, "call", b"{}", timeout=5) == {}
        assert seen == ["none"]  # as a subscription callback would run: not in the caller's context
        with pytest.raises(MaxPayloadError):
            await request_owner(nc, server_id, "call", b"x" * (nc.max_payload + 1), timeout=5)
        assert seen == ["none"]
    finally:
        local_owners.unregister(nc, server_id, owner)


async def test_a_cancel_reaches_a_local_owner_while_the_connection_is_down(nc: NATS) -> None:
    server_id = str(uuid.uuid4())
    told: list[str] = []

    async def owner(msg: OwnerRequest) -> None:
        told.append(msg.subject.rsplit(".", 1)[-1])

    local_owners.register(nc, server_id, owner)
    try:
        await nc.close()  # publishing on it would raise: the cancel must not need it
        await tell_owner(nc, server_id, "cancel", b"{}")
        assert told == ["cancel"]
    finally:
        local_owners.unregister(nc, server_id, owner)


async def test_an_owner_that_gave_a_server_up_does_not_unregister_its_successor(nc: NATS) -> None:
    server_id = str(uuid.uuid4())

    async def first(msg: OwnerRequest) -> None:
        await msg.respond(ok_reply(b'"first"'))

    async def second(msg: OwnerRequest) -> None:
        await msg.respond(ok_reply(b'"second"'))

    try:
        local_owners.register(nc, server_id, first)
        local_owners.register(nc, server_id, second)  # taken over before the first let go
        local_owners.unregister(nc, server_id, first)
        assert await request_owner(nc, server_id, "call", b"{}", timeout=5) == "second"
    finally:
        local_owners.unregister(nc, server_id, second)
