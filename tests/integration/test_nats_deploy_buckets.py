"""deploy/nats/nats.conf on a real nats-server: each role reads the buckets it uses whichever way they
were created. nats-py reads a key by direct get or by message get, as the bucket's ``allow_direct``
says, and a bucket keeps the settings it was created with: buckets an earlier version made (the MCP
sessions' without direct gets) or made by hand (`nats kv add` allows direct gets) must stay readable."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS
from nats.js.api import KeyValueConfig, StorageType

from tests.approval_calls import pending_call
from tests.harness import eventually
from tests.integration.nats_deploy import always_false, connection_as, deploy_nats
from tests.integration.test_oauth_flow_store import FLOW
from toolmesh.contracts.events import EVENTS_STREAM
from toolmesh.contracts.keys import Role
from toolmesh.contracts.mcp_sessions import McpSessionRecord
from toolmesh.credentials import CredentialBox, new_key
from toolmesh.platform.bus.leases import LeaseTable, lease_in_force
from toolmesh.platform.bus.nats_bus import NatsBus
from toolmesh.platform.bus.topology import (
    APPROVALS_BUCKET,
    IDEMPOTENCY_BUCKET,
    LEASES_BUCKET,
    MCP_SESSIONS_BUCKET,
    NAMES_BUCKET,
    OAUTH_FLOWS_BUCKET,
    approvals_bucket,
    ensure_streams,
    idempotency_bucket,
    leases_bucket,
    mcp_sessions_bucket,
    names_bucket,
    oauth_flows_bucket,
)
from toolmesh_gateway.approvals.gate import Approvals
from toolmesh_gateway.approvals.records import ApprovalRecords
from toolmesh_gateway.auth import Principal
from toolmesh_gateway.front_door.session_table import McpSessionTable
from toolmesh_gateway.idempotency import IdempotencyStore, Stored
from toolmesh_gateway.name_reservations import reserve_name
from toolmesh_gateway.upstream_oauth.flows import FlowStore

pytestmark = pytest.mark.integration
ROLE_BUCKETS = {
    "gateway": (NAMES_BUCKET, IDEMPOTENCY_BUCKET, MCP_SESSIONS_BUCKET, OAUTH_FLOWS_BUCKET, APPROVALS_BUCKET),
    "session-worker": (LEASES_BUCKET,),
    "health-worker": (LEASES_BUCKET,),
    "indexer": (LEASES_BUCKET,),
}
"""The buckets each role reads (its NATS user may create each)."""


async def create_buckets(address: str, direct: bool) -> None:
    """Every bucket as an earlier version (``direct=False``) or `nats kv add` (``direct=True``) made it."""
    for role, buckets in (("gateway", ROLE_BUCKETS["gateway"]), ("session-worker", ROLE_BUCKETS["session-worker"])):
        async with connection_as(address, role, inbox_prefix=f"_INBOX_{role}") as conn:
            js = conn.nc.jetstream(timeout=5)
            for bucket in buckets:
                config = KeyValueConfig(bucket=bucket, ttl=60, history=1, storage=StorageType.FILE, direct=direct)
                await js.create_key_value(config)
                assert (await js.stream_info(f"KV_{bucket}")).config.allow_direct is direct


async def read_as_the_gateway(address: str) -> None:
    """The gateway's reads of its buckets, each through its own code: a session record, a name taken,
    an idempotent result replayed."""
    async with connection_as(address, "gateway", inbox_prefix="_INBOX_gateway") as gateway:
        js = gateway.nc.jetstream(timeout=5)
        sessions = McpSessionTable(NatsBus(gateway.nc), await mcp_sessions_bucket(js, 60))
        record = McpSessionRecord(
            path="/mcp", key_id="k-1", namespace=None, protocol_version="2025-06-18", client_params={}, touched_at=1.0
        )
        await sessions.put("s-1", record)
        assert await sessions.get("s-1") == record
        assert await sessions.touch("s-1")
        names = await names_bucket(js)
        assert await reserve_name(names, "demo", "server-1", lambda _: always_false())
        assert not await reserve_name(names, "demo", "server-2", lambda _: always_false(), stale_after=3600)
        kept = IdempotencyStore(await idempotency_bucket(js, 60), 5)

        async def work() -> Stored:
            return Stored(201, '{"id": "one"}')

        assert await kept.run("scope", "key-1", "request", work) == (Stored(201, '{"id": "one"}'), False)
        assert await kept.run("scope", "key-1", "request", work) == (Stored(201, '{"id": "one"}'), True)
        flows = FlowStore(await oauth_flows_bucket(js, 60), CredentialBox(new_key()))
        await flows.put("state-1", FLOW)
        assert await flows.take("state-1") == FLOW
        assert await flows.take("state-1") is None  # single use
        await decide_an_approval(gateway.nc)
        assert gateway.errors == []


async def decide_an_approval(nc: NATS) -> None:
    """A call waits in the approvals bucket (watching its record) until a decision, then is listed."""
    js = nc.jetstream(timeout=5)
    await ensure_streams(js, [EVENTS_STREAM])  # requests and decisions are audited as events
    records = ApprovalRecords(await approvals_bucket(js, 60), CredentialBox(new_key()))
    gate = Approvals(records, js, NatsBus(nc), 30)
    waiting = asyncio.create_task(gate.approve(pending_call("agent-deploy")))
    owner = Principal(key_id="owner", name="owner", role=Role.OWNER, namespace="default")

    async def listed() -> str | None:
        return next((a.id for a in await gate.listed(owner, None, 10) if a.caller == "agent-deploy"), None)

    approval_id = await eventually(listed, timeout=20, what="the approval to be listed")
    await gate.decide(approval_id, owner, True, None)
    await asyncio.wait_for(waiting, 20)


async def read_leases_as_each_worker(address: str) -> None:
    """Each lease user claims its key and reads who holds it."""
    for role, key in (("session-worker", "server-1"), ("health-worker", "health-scheduler"), ("indexer", "indexer")):
        async with connection_as(address, role, inbox_prefix=f"_INBOX_{role}") as conn:
            leases = LeaseTable(await leases_bucket(conn.nc.jetstream(timeout=5), 30), role)
            assert await leases.claim(key) and await leases.holder_of(key) == role
            assert conn.errors == [], role


async def confirm_a_lease_as_the_gateway(address: str) -> None:
    """The gateway reads the token of a server's lease (it confirms an owner's fencing token)."""
    async with connection_as(address, "gateway", inbox_prefix="_INBOX_gateway") as gateway:
        leases = await gateway.nc.jetstream(timeout=5).key_value(LEASES_BUCKET)
        lease = await lease_in_force(leases, "server-1")
        assert lease is not None and lease.token is not None
        assert gateway.errors == []


@pytest.mark.parametrize("direct", [False, True], ids=["message-get", "direct-get"])
async def test_each_role_reads_its_buckets_however_they_were_created(tmp_path: Path, direct: bool) -> None:
    async with deploy_nats(tmp_path) as deploy:
        await create_buckets(deploy.address, direct)
        await read_as_the_gateway(deploy.address)
        await read_leases_as_each_worker(deploy.address)
        await confirm_a_lease_as_the_gateway(deploy.address)
        assert deploy.violations() == []
