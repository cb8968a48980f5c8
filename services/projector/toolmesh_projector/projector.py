"""The projector: a durable JetStream consumer applying events to Postgres, in stream order.

Any number of replicas share one durable consumer with ``max_ack_pending=1``, so events are
applied one at a time in sequence order whichever replica gets them; the checkpoint and the
``applied_events`` table make re-delivery and replay no-ops.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from toolmesh.contracts.event_types import decode_event
from toolmesh.contracts.events import EVENTS_STREAM, EVENTS_SUBJECTS
from toolmesh.platform.bus.consuming import consume
from toolmesh_projector.projection import apply_event, record_checkpoint, reset_read_model

log = logging.getLogger("toolmesh.projector")
DURABLE = "projector"


def consumer_config() -> ConsumerConfig:
    """One ordered lane: each event is delivered only after the previous one was acknowledged."""
    return ConsumerConfig(
        durable_name=DURABLE,
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT,
        max_ack_pending=1,
        ack_wait=10,
        filter_subject=EVENTS_SUBJECTS,
    )


async def run_projector(js: JetStreamContext, db: asyncpg.Pool, stop: asyncio.Event) -> None:
    """Apply events until ``stop`` is set."""

    async def apply(msg: Msg) -> None:
        await _apply_message(db, msg.subject, msg.data, msg.metadata.sequence.stream)
        await msg.ack_sync()

    await consume(js, EVENTS_SUBJECTS, stream=EVENTS_STREAM, config=consumer_config(), handle=apply, stop=stop)


async def _apply_message(db: asyncpg.Pool, subject: str, data: bytes, seq: int) -> None:
    try:
        event = decode_event(subject, data)
    except ValidationError as exc:
        log.error("event %d on %s is malformed and was skipped: %s", seq, subject, exc)
        event = None
    async with db.acquire() as conn:
        if event is None:
            async with conn.transaction():
                await record_checkpoint(conn, seq)
            return
        applied = await apply_event(conn, event, seq)
    log.debug("event %d %s %s", seq, subject, "applied" if applied else "already applied")


async def reset_projection(js: JetStreamContext, db: asyncpg.Pool) -> None:
    """Drop the read model and the durable consumer, so the next run replays the whole stream."""
    try:
        await js.delete_consumer(EVENTS_STREAM, DURABLE)
    except NotFoundError:
        log.info("no projector consumer to delete")
    async with db.acquire() as conn:
        await reset_read_model(conn)
