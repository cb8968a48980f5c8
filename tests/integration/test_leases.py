"""Ownership leases against a real JetStream KV bucket."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.client import Client as NATS

from tests.harness import eventually
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.topology import leases_bucket

pytestmark = pytest.mark.integration


async def test_releasing_a_lease_that_expired_is_a_no_op(nc: NATS) -> None:
    kv = await leases_bucket(nc.jetstream(), ttl_seconds=1.0)
    table = LeaseTable(kv, "worker-a")
    assert await table.claim("server-1")

    async def expired() -> bool:
        return await table.holder_of("server-1") is None

    await eventually(expired, timeout=10, what="the lease to expire")
    await table.release("server-1")  # the bucket answers "wrong last sequence: 0" here
    assert table.held() == []
    other = LeaseTable(kv, "worker-b")
    assert await other.claim("server-1")


async def test_a_lease_released_while_its_renewal_is_in_flight_is_free_afterwards(nc: NATS) -> None:
    # The renewal's update reaches the bucket before the release's conditional delete, so the delete
    # finds a newer revision; the lease must still end free, not renewed by a process that let go.
    kv = await leases_bucket(nc.jetstream(), ttl_seconds=30.0)
    table = LeaseTable(kv, "worker-a")
    assert await table.claim("server-2")
    renewal = asyncio.create_task(table.renew("server-2"))
    await asyncio.sleep(0)  # one loop turn: the renewal has sent its update and waits for the answer
    await table.release("server-2")
    assert await renewal is False
    assert table.held() == []
    assert await table.holder_of("server-2") is None
    assert await LeaseTable(kv, "worker-b").claim("server-2")
