"""The gateway's call audit batches against real JetStream: a flush publishes what was gathered when
it started, so steady calls make one event per round, not one per JetStream round trip; a batch is
retried as the same event, so the stream keeps it once."""

from __future__ import annotations

import asyncio
import secrets
from datetime import UTC, datetime

import nats
import nats.errors
import pytest
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from tests.harness import eventually
from toolmesh.contracts.events import EVENTS_STREAM
from toolmesh.contracts.namespace_events import CallRecord, CallsRecorded
from toolmesh.platform.bus.topology import ensure_topology
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


async def test_a_batch_whose_publishing_was_cancelled_is_kept_once_in_the_stream(nats_url: str) -> None:
    """Closing while a flush waits for JetStream's ack (the request already on its way) retries the
    same event, so the stream de-duplicates it: every record is in the stream once."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await ensure_topology(js, lease_ttl_seconds=30)
        namespace = f"audit-{secrets.token_hex(4)}"
        stored = await js.pull_subscribe(
            CallsRecorded.subject, config=ConsumerConfig(deliver_policy=DeliverPolicy.NEW), stream=EVENTS_STREAM
        )
        audit = CallAudit(js)
        audit.record(namespace, _call("only"))
        flushing = asyncio.create_task(audit.flush())
        await asyncio.sleep(0)  # one step: the flush hands its batch to the client and waits for the ack
        flushing.cancel()
        await asyncio.gather(flushing, return_exceptions=True)
        await audit.close()  # publishes what was not acknowledged

        tools: list[str] = []

        async def stream_drained() -> bool:
            try:
                messages = await stored.fetch(10, timeout=0.5)
            except nats.errors.TimeoutError:
                return len(tools) > 0
            for msg in messages:
                await msg.ack()
                event = CallsRecorded.model_validate_json(msg.data)
                if event.namespace == namespace:
                    tools.extend(call.tool for call in event.calls)
            return False

        await eventually(stream_drained, timeout=10, what="the stored batches")
        assert tools == ["only"]
        await stored.unsubscribe()
    finally:
        await nc.close()
