"""The gateway's call audit batches against real JetStream: a flush publishes what was gathered when
it started, so steady calls make one event per round, not one per JetStream round trip."""

from __future__ import annotations

import asyncio
import secrets
from datetime import UTC, datetime

import nats
import pytest
from nats.aio.msg import Msg

from tests.harness import eventually
from toolmesh.bus.topology import ensure_topology
from toolmesh.contracts.events import CallRecord, CallsRecorded
from toolmesh_gateway.call_audit import CallAudit

pytestmark = pytest.mark.integration


def _call(tool: str) -> CallRecord:
    return CallRecord(
        server_id="server-1", server_name="demo", tool=tool, outcome="ok", duration_ms=1.0, at=datetime.now(UTC)
    )


async def test_a_record_made_while_a_flush_publishes_waits_for_the_next_flush(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await ensure_topology(js, lease_ttl_seconds=30)
        namespace = f"audit-{secrets.token_hex(4)}"
        published: list[list[str]] = []

        async def collect(msg: Msg) -> None:
            event = CallsRecorded.model_validate_json(msg.data)
            if event.namespace == namespace:
                published.append([call.tool for call in event.calls])

        sub = await nc.subscribe(CallsRecorded.subject, cb=collect)
        audit = CallAudit(js)  # not started: only the explicit flushes below publish
        audit.record(namespace, _call("first"))
        flushing = asyncio.create_task(audit.flush())
        await asyncio.sleep(0)  # the flush runs until it waits for JetStream's ack of its batch
        audit.record(namespace, _call("second"))
        await flushing

        await eventually(lambda: published, timeout=10, what="the first batch")
        await nc.flush()
        assert published == [["first"]]
        await audit.close()  # publishes what is left
        await eventually(lambda: len(published) == 2, timeout=10, what="the second batch")
        assert published == [["first"], ["second"]]
        await sub.unsubscribe()
    finally:
        await nc.close()
