"""The ``Bus`` contract, one suite run on every implementation: ``NatsBus`` (a real NATS), ``InProcessBus``
and ``LocalFirstBus`` (its subscriptions here are not owned: it behaves as NATS). Request/reply, no
responders, timeouts, queue groups, wildcards, fan-out, headers, the payload limit, unsubscribe and
one-at-a-time delivery per subscription are the same on all three."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.errors import MaxPayloadError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from tests.harness import eventually
from toolmesh.platform.bus.in_process import InProcessBus
from toolmesh.platform.bus.interface import Bus, Callback, Message
from toolmesh.platform.bus.local_first import LocalFirstBus
from toolmesh.platform.bus.nats_bus import NatsBus

pytestmark = pytest.mark.integration


@pytest.fixture(params=["nats", "in_process", "local_first"])
async def bus(request: pytest.FixtureRequest, nats_url: str) -> AsyncIterator[Bus]:
    """Each implementation in turn, on a connection of its own."""
    if request.param == "in_process":
        local = InProcessBus()
        yield local
        await local.close()
        return
    nc = await nats.connect(nats_url)
    remote = NatsBus(nc)
    if request.param == "nats":
        yield remote
    else:
        first = LocalFirstBus(remote)
        yield first
        await first.close()
    await nc.close()


def subject(*tokens: str) -> str:
    """A subject no other test uses."""
    return ".".join(("contract", uuid.uuid4().hex, *tokens))


async def barrier(bus: Bus) -> None:
    """Return once the bus has carried a round trip sent after everything sent before."""
    here = subject("barrier")

    async def answer(msg: Message) -> None:
        await msg.respond(b"")

    sub = await bus.subscribe(here, answer)
    try:
        await bus.request(here, b"", timeout=10)
    finally:
        await sub.unsubscribe()


async def echo(msg: Message) -> None:
    await msg.respond(b"echo:" + msg.data)


async def test_a_request_gets_its_subscribers_reply(bus: Bus) -> None:
    here = subject("echo")
    await bus.subscribe(here, echo)
    assert await bus.request(here, b"hello", timeout=10) == b"echo:hello"


async def test_a_request_nobody_subscribes_to_fails_with_no_responders(bus: Bus) -> None:
    with pytest.raises(NoRespondersError):
        await bus.request(subject("nobody"), b"{}", timeout=10)


async def test_a_request_without_a_reply_in_time_times_out(bus: Bus) -> None:
    here = subject("silent")
    held: list[Message] = []

    async def silent(msg: Message) -> None:
        held.append(msg)

    await bus.subscribe(here, silent)
    with pytest.raises(NatsTimeout):
        await bus.request(here, b"{}", timeout=0.2)
    assert len(held) == 1
    await held[0].respond(b"late")  # a late answer to a requester that gave up is dropped


async def test_a_queue_group_delivers_each_message_to_one_member(bus: Bus) -> None:
    here = subject("work")
    got: dict[str, list[bytes]] = {"a": [], "b": []}

    def member(name: str) -> Callback:
        async def take(msg: Message) -> None:
            got[name].append(msg.data)

        return take

    await bus.subscribe(here, member("a"), queue="workers")
    await bus.subscribe(here, member("b"), queue="workers")
    sent = [str(n).encode() for n in range(20)]
    for data in sent:
        await bus.publish(here, data)
    await eventually(lambda: len(got["a"]) + len(got["b"]) >= len(sent), timeout=10, what="every message taken")
    await barrier(bus)
    assert sorted(got["a"] + got["b"], key=int) == sent  # each once


async def test_wildcards_match_one_token_or_every_trailing_token(bus: Bus) -> None:
    base = subject()
    seen: dict[str, list[str]] = {"star": [], "tail": []}

    async def star(msg: Message) -> None:
        seen["star"].append(msg.subject)

    async def tail(msg: Message) -> None:
        seen["tail"].append(msg.subject)

    await bus.subscribe(f"{base}.*.end", star)
    await bus.subscribe(f"{base}.>", tail)
    for suffix in ("a.end", "a.b.end", "a", ""):
        await bus.publish(f"{base}.{suffix}".rstrip("."), b"{}")
    await eventually(lambda: len(seen["tail"]) >= 3, timeout=10, what="the > subscription's messages")
    await barrier(bus)
    assert seen == {"star": [f"{base}.a.end"], "tail": [f"{base}.a.end", f"{base}.a.b.end", f"{base}.a"]}


async def test_a_published_message_reaches_every_plain_subscriber(bus: Bus) -> None:
    here = subject("news")
    got: list[tuple[str, bytes]] = []

    async def first(msg: Message) -> None:
        got.append(("first", msg.data))

    async def second(msg: Message) -> None:
        got.append(("second", msg.data))

    await bus.subscribe(here, first)
    await bus.subscribe(here, second)
    await bus.publish(here, b"x")
    await eventually(lambda: len(got) >= 2, timeout=10, what="both subscribers")
    await barrier(bus)
    assert sorted(got) == [("first", b"x"), ("second", b"x")]


async def test_headers_reach_the_subscriber(bus: Bus) -> None:
    here = subject("headers")

    async def answer(msg: Message) -> None:
        await msg.respond((msg.headers or {}).get("traceparent", "none").encode())

    await bus.subscribe(here, answer)
    assert await bus.request(here, b"{}", headers={"traceparent": "00-abc-def-01"}, timeout=10) == b"00-abc-def-01"
    assert await bus.request(here, b"{}", timeout=10) == b"none"


async def test_a_message_over_the_payload_limit_is_refused(bus: Bus) -> None:
    here = subject("big")
    await bus.subscribe(here, echo)
    assert bus.max_payload > 0
    with pytest.raises(MaxPayloadError):
        await bus.request(here, b"x" * (bus.max_payload + 1), timeout=10)
    with pytest.raises(MaxPayloadError):
        await bus.publish(here, b"x" * (bus.max_payload + 1))
    assert await bus.request(here, b"x" * 100, timeout=10) == b"echo:" + b"x" * 100
    assert bus.is_connected


async def test_an_unsubscribed_callback_gets_nothing_more(bus: Bus) -> None:
    here = subject("gone")
    sub = await bus.subscribe(here, echo)
    assert await bus.request(here, b"1", timeout=10) == b"echo:1"
    await sub.unsubscribe()
    with pytest.raises(NoRespondersError):
        await bus.request(here, b"2", timeout=10)


async def test_a_drained_subscription_handles_what_it_received_then_nothing_more(bus: Bus) -> None:
    here = subject("drained")
    handled: list[bytes] = []
    release = asyncio.Event()

    async def slow(msg: Message) -> None:
        await release.wait()
        handled.append(msg.data)

    sub = await bus.subscribe(here, slow)
    for data in (b"1", b"2"):
        await bus.publish(here, data)
    await barrier(bus)  # both received
    release.set()
    await sub.drain()
    assert handled == [b"1", b"2"]
    await bus.publish(here, b"3")
    await barrier(bus)
    assert handled == [b"1", b"2"]


async def test_a_subscription_delivers_one_message_at_a_time_in_order(bus: Bus) -> None:
    here = subject("sequential")
    started: list[bytes] = []
    release = asyncio.Event()

    async def slow(msg: Message) -> None:
        started.append(msg.data)
        if msg.data == b"1":
            await release.wait()

    await bus.subscribe(here, slow)
    for data in (b"1", b"2", b"3"):
        await bus.publish(here, data)
    await eventually(lambda: started, timeout=10, what="the first message")
    await barrier(bus)  # the others have arrived, and wait for the first to be handled
    assert started == [b"1"]
    release.set()
    await eventually(lambda: len(started) == 3, timeout=10, what="the rest, once the first was handled")
    assert started == [b"1", b"2", b"3"]
