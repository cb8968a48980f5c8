"""What the console's event stream lets through, and how it shows events (no servers)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from toolmesh.contracts.events import (
    DiscoveredTool,
    ServerConfigResealed,
    ServerRegistered,
    ServerStatusChanged,
    ToolsDiscovered,
)
from toolmesh.contracts.keys import Role
from toolmesh.contracts.namespace_events import CallRecord, CallsRecorded, KeyRevoked
from toolmesh.lifecycle import ServerStatus
from toolmesh_gateway.auth import Principal
from toolmesh_gateway.event_hub import Subscription, streamed, visible

STATUS = ServerStatusChanged(
    server_id="s1", namespace="team-a", status=ServerStatus.CONNECTED, history="CONNECTED", actor="worker"
)
REVOKED = KeyRevoked(key_id="k1", name="ci", role="user", namespace="team-a", ip_address="10.0.0.9")
CALLS = CallsRecorded(
    namespace="team-a",
    calls=[
        CallRecord(server_id="s1", server_name="github", tool="x", outcome="ok", duration_ms=1.0, at=datetime.now(UTC))
    ],
)


def test_a_caller_sees_its_namespace_only_and_the_owner_sees_all() -> None:
    assert visible(STATUS, "team-a", manages=False)
    assert not visible(STATUS, "team-b", manages=True)
    assert visible(STATUS, None, manages=True)


def test_key_events_and_call_records_reach_managers_only() -> None:
    for event in (REVOKED, CALLS):
        assert not visible(event, "team-a", manages=False)
        assert visible(event, "team-a", manages=True)


def test_sealed_configs_and_addresses_never_leave_the_gateway() -> None:
    registered = ServerRegistered(
        server_id="s1",
        name="github",
        transport_type="HTTP",
        sealed_config="v1:secret-bytes",
        masked_config={"base_url": "https://h/mcp", "headers": {"Authorization": "***"}},
        ip_address="10.0.0.9",
        namespace="team-a",
        actor="admin-a",
    )
    item = streamed(registered, 41)
    assert (item.seq, item.type, item.server_id, item.namespace, item.actor) == (
        41,
        "server.registered",
        "s1",
        "team-a",
        "admin-a",
    )
    assert "sealed_config" not in item.data and "ip_address" not in item.data
    assert item.data["masked_config"]["headers"]["Authorization"] == "***"
    resealed = streamed(ServerConfigResealed(server_id="s1", sealed_config="v1:x", key_id="k"), 42)
    assert resealed.data == {"key_id": "k"}
    assert "ip_address" not in streamed(REVOKED, 43).data


def test_a_tool_snapshot_is_summarised() -> None:
    tools = [DiscoveredTool(original_name=f"t{i}", input_schema={"type": "object"}) for i in range(3)]
    item = streamed(ToolsDiscovered(server_id="s1", server_name="github", tools=tools), 7)
    assert item.data == {"server_name": "github", "tools": ["t0", "t1", "t2"], "left_out": 0, "tool_count": 3}


def _principal() -> Principal:
    return Principal(key_id="k1", name="ci", role=Role.USER, namespace="team-a")


async def test_a_subscription_ends_after_what_is_queued() -> None:
    subscription = Subscription(_principal(), "team-a", size=4)
    first, second = streamed(STATUS, 1), streamed(STATUS, 2)
    subscription.offer(first)
    subscription.offer(second)
    subscription.end()
    subscription.offer(streamed(STATUS, 3))  # after the end: dropped
    assert [await subscription.next() for _ in range(3)] == [first, second, None]


async def test_a_reader_that_falls_a_queue_behind_is_ended_not_buffered() -> None:
    subscription = Subscription(_principal(), "team-a", size=2)
    for seq in range(1, 4):
        subscription.offer(streamed(STATUS, seq))
    assert subscription.ended
    assert await asyncio.wait_for(subscription.next(), 1) is None
