"""The indexer: a durable JetStream consumer projecting events into the vector index, in stream order.

The index's own checkpoint (stored beside it) is the truth about what was applied: at start the
consumer is (re)positioned just after it, so a wiped or restored index replays what it lacks.
Replicas (Qdrant backend) share the durable consumer with ``max_ack_pending=1``, like the projector.
"""

from __future__ import annotations

import asyncio
import logging

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from toolmesh.bus.consuming import consume
from toolmesh.contracts.events import EVENTS_STREAM, EVENTS_SUBJECTS, Event, decode_event
from toolmesh.index.base import ToolIndex
from toolmesh.index.projection import IndexProjection

log = logging.getLogger("toolmesh.indexer")
DURABLE = "indexer"


def consumer_config(after_seq: int) -> ConsumerConfig:
    """One ordered lane starting just after the index's checkpoint."""
    return ConsumerConfig(
        durable_name=DURABLE,
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if after_seq > 0 else DeliverPolicy.ALL,
        opt_start_seq=after_seq + 1 if after_seq > 0 else None,
        ack_policy=AckPolicy.EXPLICIT,
        max_ack_pending=1,
        ack_wait=60,
        filter_subject=EVENTS_SUBJECTS,
    )


async def _position_consumer(js: JetStreamContext, after_seq: int) -> None:
    """Drop the durable consumer when it is ahead of the index (the index was wiped or restored)."""
    try:
        info = await js.consumer_info(EVENTS_STREAM, DURABLE)
    except NotFoundError:
        return
    acknowledged = info.ack_floor.stream_seq if info.ack_floor else 0
    if acknowledged > after_seq:
        log.warning("index checkpoint %d is behind the consumer (%d): replaying", after_seq, acknowledged)
        await js.delete_consumer(EVENTS_STREAM, DURABLE)


async def run_indexer(js: JetStreamContext, projection: IndexProjection, stop: asyncio.Event) -> None:
    """Apply events to the index until ``stop`` is set."""
    state = await projection.start()
    await _position_consumer(js, state.last_seq)

    async def apply(msg: Msg) -> None:
        seq = msg.metadata.sequence.stream
        applied = await projection.apply(_decode(msg.subject, msg.data, seq), seq)
        log.debug("event %d %s %s", seq, msg.subject, "indexed" if applied else "skipped")
        await msg.ack_sync()

    config = consumer_config(state.last_seq)
    await consume(js, EVENTS_SUBJECTS, stream=EVENTS_STREAM, config=config, handle=apply, stop=stop)


def _decode(subject: str, data: bytes, seq: int) -> Event | None:
    try:
        return decode_event(subject, data)
    except ValidationError as exc:
        log.error("event %d on %s is malformed and was skipped: %s", seq, subject, exc)
        return None


async def reset_index(js: JetStreamContext, index: ToolIndex) -> None:
    """Empty the index and its checkpoint and drop the consumer: the next run replays every event."""
    try:
        await js.delete_consumer(EVENTS_STREAM, DURABLE)
    except NotFoundError:
        log.info("no indexer consumer to delete")
    await index.reset()
