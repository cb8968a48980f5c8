"""The ``requestState`` of a 2026-07-28 upstream as relayed to a client (``front_door.relayed_states``)
on a real NATS: a refused attempt (another principal, another request, another server, tampered,
expired) spends nothing, so its owner's retry still completes; the owner's state opens once."""

from __future__ import annotations

import mcp_types
import pytest
from mcp.server.request_state import AESGCMRequestStateCodec
from mcp.shared.exceptions import MCPError
from nats.aio.client import Client as NATS

from toolmesh.platform.bus.topology import spent_states_bucket
from toolmesh_gateway.front_door.relayed_states import RelayedStates

pytestmark = pytest.mark.integration
KEY = bytes(range(32))
OWNER, INTRUDER = '["key-owner", "ns"]', '["key-weakest", "ns"]'


async def states(nc: NATS, lifetime: float = 60) -> RelayedStates:
    return RelayedStates(AESGCMRequestStateCodec([KEY]), lifetime, await spent_states_bucket(nc.jetstream(), 60))


async def refused(relayed: RelayedStates, presented: object, server: str, starter: str, request: str) -> bool:
    try:
        await relayed.redeem(presented, server, starter, request)
    except MCPError as exc:
        return exc.error.code == mcp_types.INVALID_PARAMS
    return False


async def test_refused_attempts_spend_nothing_and_the_owner_redeems_once(nc: NATS) -> None:
    relayed = await states(nc)
    sealed = relayed.seal("upstream-own-state", "server-a", OWNER, "request-1")
    assert await refused(relayed, sealed, "server-a", INTRUDER, "request-1")
    assert await refused(relayed, sealed, "server-a", "", "request-1")
    assert await refused(relayed, sealed, "server-a", OWNER, "request-2")
    assert await refused(relayed, sealed, "server-b", OWNER, "request-1")
    assert await refused(relayed, sealed[:-4] + "AAAA", "server-a", OWNER, "request-1")
    assert await refused(relayed, {"state": sealed}, "server-a", OWNER, "request-1")
    assert await relayed.redeem(sealed, "server-a", OWNER, "request-1") == "upstream-own-state"
    assert await refused(relayed, sealed, "server-a", OWNER, "request-1")


async def test_an_expired_state_is_refused(nc: NATS) -> None:
    relayed = await states(nc, lifetime=-1)
    sealed = relayed.seal("upstream-own-state", "server-a", OWNER, "request-1")
    assert await refused(relayed, sealed, "server-a", OWNER, "request-1")


async def test_a_state_of_another_deployment_is_refused(nc: NATS) -> None:
    other = RelayedStates(AESGCMRequestStateCodec([bytes(32)]), 60, await spent_states_bucket(nc.jetstream(), 60))
    sealed = other.seal("upstream-own-state", "server-a", OWNER, "request-1")
    assert await refused(await states(nc), sealed, "server-a", OWNER, "request-1")
