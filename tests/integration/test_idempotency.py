"""The idempotency store on a real JetStream KV bucket: one run per key, waits, takeovers, reuse."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import nats
import pytest
from nats.js.kv import KeyValue

from tests.harness import eventually
from toolmesh.errors import IdempotencyKeyReused
from toolmesh.platform.bus.topology import idempotency_bucket
from toolmesh_gateway.idempotency import IdempotencyStore, Stored, fingerprint

pytestmark = pytest.mark.integration
CLAIM_SECONDS = 1.0


@pytest.fixture
async def kv(nats_url: str) -> AsyncIterator[KeyValue]:
    nc = await nats.connect(nats_url, connect_timeout=5)
    try:
        yield await idempotency_bucket(nc.jetstream(), 60)
    finally:
        await nc.close()


async def test_a_slow_first_run_is_waited_for_and_renewed_past_its_claim(kv: KeyValue) -> None:
    store, other_replica = IdempotencyStore(kv, CLAIM_SECONDS), IdempotencyStore(kv, CLAIM_SECONDS)
    runs: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    async def slow() -> Stored:
        runs.append("first")
        started.set()
        await release.wait()
        return Stored(201, '{"id": "one"}')

    async def again() -> Stored:
        runs.append("again")
        return Stored(201, '{"id": "two"}')

    first = asyncio.ensure_future(store.run("key-a", "k1", "request", slow))
    await started.wait()
    claimed = (await kv.get(fingerprint("key-a", "k1"))).revision
    duplicate = asyncio.ensure_future(other_replica.run("key-a", "k1", "request", again))

    async def renewed_past_one_claim() -> bool:  # 4 renewals, a third of a claim apart
        return (await kv.get(fingerprint("key-a", "k1"))).revision >= claimed + 4

    await eventually(renewed_past_one_claim, timeout=10, what="the claim to be renewed")
    assert not duplicate.done()
    release.set()
    assert await first == (Stored(201, '{"id": "one"}'), False)
    assert await duplicate == (Stored(201, '{"id": "one"}'), True)
    assert runs == ["first"]


async def test_an_abandoned_claim_is_taken_over(kv: KeyValue) -> None:
    key = fingerprint("key-b", "k2")
    abandoned = {"fingerprint": "request", "state": "pending", "renew_by": time.time() - 1}
    await kv.create(key, json.dumps(abandoned).encode())  # what a gateway that died leaves behind

    async def work() -> Stored:
        return Stored(200, "{}")

    assert await IdempotencyStore(kv, CLAIM_SECONDS).run("key-b", "k2", "request", work) == (Stored(200, "{}"), False)
    assert json.loads((await kv.get(key)).value or b"")["state"] == "done"


async def test_keys_are_per_principal_and_bound_to_their_request(kv: KeyValue) -> None:
    store = IdempotencyStore(kv, CLAIM_SECONDS)
    count = 0

    async def work() -> Stored:
        nonlocal count
        count += 1
        return Stored(200, json.dumps({"n": count}))

    assert (await store.run("alice", "same", "request", work))[0].body == '{"n": 1}'
    assert (await store.run("bob", "same", "request", work))[0].body == '{"n": 2}'
    with pytest.raises(IdempotencyKeyReused):
        await store.run("alice", "same", "another request", work)
    assert count == 2


async def test_a_failed_run_releases_its_key(kv: KeyValue) -> None:
    store = IdempotencyStore(kv, CLAIM_SECONDS)

    async def broken() -> Stored:
        raise RuntimeError("crashed before any result")

    async def work() -> Stored:
        return Stored(200, "{}")

    with pytest.raises(RuntimeError):
        await store.run("carol", "k3", "request", broken)
    assert await store.run("carol", "k3", "request", work) == (Stored(200, "{}"), False)
    assert await store.run("carol", "k4", "request", work, keep=lambda s: False) == (Stored(200, "{}"), False)
    assert await store.run("carol", "k4", "request", work) == (Stored(200, "{}"), False)  # not kept: runs again
