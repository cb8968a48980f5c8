"""A 2026-07-28 retry that reached another replica fails as it would on the replica that parked its
request: a toolmesh error of the upstream call stays that error (``tools/call`` makes it an
``isError`` result), an MCP error keeps its data (a URL elicitation's URLs), and a retry the client
gives up ends the upstream call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any, cast

import mcp_types
import pytest
from mcp.shared.exceptions import MCPError
from nats.js.kv import KeyValue

from toolmesh.contracts.clients import ClientRequest
from toolmesh.contracts.keys import Role
from toolmesh.errors import ExecutionFailed
from toolmesh.platform.bus.in_process import InProcessBus
from toolmesh_gateway.auth import Caller, Principal
from toolmesh_gateway.front_door.client_links import ClientLink, ClientLinks, Ctx, PendingInput
from toolmesh_gateway.front_door.input_required import InputBridge
from toolmesh_gateway.front_door.session_channels import SessionChannels
from toolmesh_gateway.front_door.sessions import CALLER_KEY

MODERN = "2026-07-28"
KEYS = [bytes(32)]
ALICE = Caller(Principal("key-alice", "alice", Role.ADMIN, "default"))


def ctx(**params: Any) -> Ctx:
    """A ``tools/call`` of alice's at ``/mcp`` in the 2026-07-28 protocol."""
    request = SimpleNamespace(scope={CALLER_KEY: ALICE, "path": "/mcp"}, headers={})
    return cast(
        Ctx,
        SimpleNamespace(
            method="tools/call",
            protocol_version=MODERN,
            params={"name": "remote__ask", "arguments": {}, **params},
            request=request,
            session=SimpleNamespace(
                client_capabilities=mcp_types.ClientCapabilities(sampling=mcp_types.SamplingCapability())
            ),
        ),
    )


@asynccontextmanager
async def two_replicas() -> AsyncIterator[tuple[InputBridge, InputBridge]]:
    """Replica A's and B's bridges on one bus."""
    bus = InProcessBus()
    links = [ClientLinks(bus, replica, SessionChannels()) for replica in ("aaaaaaaaaaaa", "bbbbbbbbbbbb")]
    for link in links:
        await link.start()
    unused = cast(KeyValue, object())  # the spent-state marks of relayed states, which these tests never redeem
    bridges = [InputBridge(link, 5.0, KEYS, unused, 5.0) for link in links]
    try:
        yield bridges[0], bridges[1]
    finally:
        for bridge, link in zip(bridges, links, strict=True):
            await bridge.close()
            await link.close()
        await bus.close()


async def asks_then(link: ClientLink, failure: Exception) -> dict[str, Any]:
    """An upstream call that asks the client to sample, then fails with ``failure``."""
    await asks(link)
    raise failure


async def asks(link: ClientLink) -> None:
    """The upstream asks the client to sample and waits for the answer."""
    asked = ClientRequest(
        server_id="s1",
        server_name="remote",
        method="sampling/createMessage",
        params={"messages": [{"role": "user", "content": {"type": "text", "text": "ok?"}}], "maxTokens": 10},
        timeout_seconds=5,
        request_id="q1",
    )
    pending = PendingInput(asked, asyncio.get_running_loop().create_future())
    link.inputs.put_nowait(pending)
    await pending.answer


async def retried_at_b(failure: Exception) -> None:
    """Start a call at A, retry it at B (the upstream call then fails with ``failure``)."""
    async with two_replicas() as (a, b):
        started = await a.run(ctx(), lambda link: asks_then(link, failure))
        assert isinstance(started, mcp_types.InputRequiredResult)
        sampled = {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"}
        retry = ctx(requestState=started.request_state, inputResponses={"q1": sampled})
        await b.run(retry, lambda link: asks_then(link, failure))


async def test_a_toolmesh_error_of_the_upstream_call_crosses_intact() -> None:
    with pytest.raises(ExecutionFailed) as raised:
        await retried_at_b(ExecutionFailed("the upstream tool failed", {"server": "remote"}))
    assert raised.value.detail == "the upstream tool failed"
    assert raised.value.context == {"server": "remote"}


async def test_an_mcp_error_keeps_its_data() -> None:
    data = {"elicitations": [{"mode": "url", "url": "https://idp.example/consent", "elicitationId": "e1"}]}
    with pytest.raises(MCPError) as raised:
        await retried_at_b(MCPError(code=-32042, message="authorize first", data=data))
    assert raised.value.code == -32042
    assert raised.value.error.data == data


async def test_a_retry_given_up_at_b_cancels_the_upstream_call_at_a() -> None:
    """Before: A went on waiting for the upstream, whose result nobody would read."""
    answered, ended = asyncio.Event(), asyncio.Event()

    async def asks_then_waits(link: ClientLink) -> dict[str, Any]:
        await asks(link)
        answered.set()
        try:
            await asyncio.Event().wait()  # the upstream works on, until it is cancelled
        except asyncio.CancelledError:
            ended.set()
            raise
        return {}

    async with two_replicas() as (a, b):
        started = await a.run(ctx(), asks_then_waits)
        assert isinstance(started, mcp_types.InputRequiredResult)
        sampled = {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"}
        retry = asyncio.ensure_future(
            b.run(ctx(requestState=started.request_state, inputResponses={"q1": sampled}), asks_then_waits)
        )
        await asyncio.wait_for(answered.wait(), 5)
        retry.cancel()
        await asyncio.wait_for(ended.wait(), 5)
        assert retry.cancelled()
