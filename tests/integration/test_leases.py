"""Ownership leases against a real JetStream KV bucket."""

from __future__ import annotations

import nats
import pytest

from tests.harness import eventually
from toolmesh.bus.leases import LeaseTable
from toolmesh.bus.topology import leases_bucket

pytestmark = pytest.mark.integration


async def test_releasing_a_lease_that_expired_is_a_no_op(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
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
    finally:
        await nc.close()
