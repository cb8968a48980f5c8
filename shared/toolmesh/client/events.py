"""Following the event stream from any point: ``toolmesh.evt.*`` in JetStream ``TOOLMESH_EVENTS``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from toolmesh.contracts.event_types import decode_event
from toolmesh.contracts.events import EVENTS_STREAM, EVENTS_SUBJECTS, Event


async def follow_events(
    nc: NATS,
    subjects: str = EVENTS_SUBJECTS,
    *,
    start_sequence: int | None = None,
    start_time: datetime | None = None,
) -> AsyncIterator[tuple[int, Event]]:
    """Every event on ``subjects`` with its stream sequence, from ``start_sequence`` (or ``start_time``;
    neither: only new events) on, in order, through an ordered consumer (nothing to clean up).

    Remember the last sequence you handled and pass ``start_sequence=last + 1`` to resume.
    Events of a subject this client version does not know are skipped.
    """
    if start_sequence is not None:
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start_sequence)
    elif start_time is not None:
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=start_time)
    else:
        config = ConsumerConfig(deliver_policy=DeliverPolicy.NEW)
    queue: asyncio.Queue[Msg] = asyncio.Queue()

    async def enqueue(msg: Msg) -> None:
        await queue.put(msg)

    sub = await nc.jetstream().subscribe(
        subjects, stream=EVENTS_STREAM, ordered_consumer=True, config=config, cb=enqueue
    )
    try:
        while True:
            msg = await queue.get()
            event = decode_event(msg.subject, msg.data)
            if event is not None:
                yield msg.metadata.sequence.stream, event
    finally:
        await sub.unsubscribe()
