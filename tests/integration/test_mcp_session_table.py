"""The MCP session table against real JetStream KV: a replica serves a session from the copy of its
record it read a moment ago, and an end still reaches a replica that never heard it announced."""

from __future__ import annotations

import secrets
import time

import nats
import pytest
from nats.aio.client import Client as NATS

from tests.harness import eventually
from toolmesh.contracts.mcp_sessions import SESSION_ENDED_SUBJECT, McpSessionEnded, McpSessionRecord
from toolmesh.platform.bus.nats_bus import NatsBus
from toolmesh.platform.bus.topology import mcp_sessions_bucket
from toolmesh_gateway.front_door.session_table import McpSessionTable

pytestmark = pytest.mark.integration


def _record() -> McpSessionRecord:
    return McpSessionRecord(
        path="/mcp",
        key_id="key-1",
        namespace="default",
        protocol_version="2025-06-18",
        client_params={},
        touched_at=time.time(),
    )


async def test_a_recent_copy_is_served_without_reading_the_bucket(nc: NATS) -> None:
    kv = await mcp_sessions_bucket(nc.jetstream(), 60)
    table = McpSessionTable(NatsBus(nc), kv, trust_seconds=600)
    session = secrets.token_hex(16)
    await table.put(session, _record())
    stored = await table.get(session)
    assert stored is not None and await table.recent(session) == stored
    await kv.delete(session)  # behind the table's back: only ``end`` announces an end
    assert await table.get(session) is None
    assert await table.recent(session) is not None  # the copy read a moment ago


async def test_an_end_on_one_replica_reaches_a_replica_that_missed_its_announcement(nats_url: str) -> None:
    one, other = await nats.connect(nats_url), await nats.connect(nats_url)
    try:
        trust = 0.5
        first = McpSessionTable(NatsBus(one), await mcp_sessions_bucket(one.jetstream(), 60), trust_seconds=trust)
        second = McpSessionTable(NatsBus(other), await mcp_sessions_bucket(other.jetstream(), 60), trust_seconds=trust)
        session = secrets.token_hex(16)
        await first.put(session, _record())
        assert await second.recent(session) is not None  # the second replica holds a copy, and does
        assert await first.recent(session) is not None  # not follow the announcements of ends
        await first.end(session)
        assert await first.recent(session) is None
        assert await second.recent(session) is None  # its copy went stale while ``end`` waited
    finally:
        await one.close()
        await other.close()


async def test_a_read_that_returns_after_the_end_was_heard_keeps_no_copy(nc: NATS) -> None:
    """The end announcement can overtake a read of the record still under way on a replica: what that
    read returns must not bring the session back."""
    table = McpSessionTable(NatsBus(nc), await mcp_sessions_bucket(nc.jetstream(), 60), trust_seconds=600)
    session = secrets.token_hex(16)
    await table.put(session, _record())
    heard: list[str] = []

    async def on_end(session_id: str) -> None:
        heard.append(session_id)

    subscription = await table.follow_ends(on_end)
    # The announcement first; the record is still in the bucket, as for a read that began before the delete.
    await nc.publish(SESSION_ENDED_SUBJECT, McpSessionEnded(session_id=session).model_dump_json().encode())
    await eventually(lambda: heard, timeout=10, what="the end announcement")
    assert await table.get(session) is not None
    assert await table.recent(session) is None
    await subscription.unsubscribe()
