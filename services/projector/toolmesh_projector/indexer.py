"""The indexer: a durable JetStream consumer projecting events into the vector index, in stream order.

The index's own checkpoint (stored beside it) is the truth about what was applied: at start the
consumer is (re)positioned just after it, so a wiped or restored index replays what it lacks.
Replicas (Qdrant backend) take turns: the one holding the ``indexer`` lease consumes, the others wait
to take over. The indexer also keeps the in-memory catalog searches read, and answers searches forwarded over
NATS by gateways that run in other processes.
"""

from __future__ import annotations

import asyncio
import logging

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from toolmesh.contracts.event_types import decode_event
from toolmesh.contracts.events import EVENTS_STREAM, EVENTS_SUBJECTS, Event
from toolmesh.index.base import ToolIndex
from toolmesh.platform.bus.consuming import consume
from toolmesh.platform.bus.interface import Bus
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.config import Settings
from toolmesh.platform.process_context import ProcessContext
from toolmesh.platform.supervision import wait_event
from toolmesh.search.remote import serve_search
from toolmesh.search.service import SearchService
from toolmesh.search.setup import index_lag, lend_table
from toolmesh_projector.index_projection import IndexProjection

log = logging.getLogger("toolmesh.indexer")
DURABLE = "indexer"
LEASE = "indexer"  # in the leases bucket: the one replica applying events and answering searches


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


async def run_indexer(
    bus: Bus,
    js: JetStreamContext,
    projection: IndexProjection,
    settings: Settings,
    leases: LeaseTable,
    stop: asyncio.Event,
    context: ProcessContext,
) -> None:
    """While holding the indexer lease: apply events, publish catalogs and answer searches with them.

    One replica is active at a time (the others wait for the lease): each replica's catalog is a
    copy of the whole index, so two replicas sharing the event stream would each hold half of it.
    """
    if not await _lead(leases, settings, stop):
        return
    halt = asyncio.Event()  # stop, the lease lost, or the consumer failed: wind everything down
    try:
        state = await projection.start()
        await _position_consumer(js, state.last_seq)

        async def apply(msg: Msg) -> None:
            seq = msg.metadata.sequence.stream
            applied = await projection.apply(_decode(msg.subject, msg.data, seq), seq)
            log.debug("event %d %s %s", seq, msg.subject, "indexed" if applied else "skipped")
            await msg.ack_sync()

        config = consumer_config(state.last_seq)
        table = projection.table
        service = SearchService(table.catalog, projection.embedder, lag=index_lag(js))
        with lend_table(context, table):
            async with asyncio.TaskGroup() as group:
                group.create_task(_keep_lease(leases, settings, stop, halt))
                group.create_task(table.run_publisher(halt))
                group.create_task(projection.run_flusher(halt))
                group.create_task(projection.run_embedder(halt))
                group.create_task(serve_search(bus, service, halt))
                try:
                    await consume(js, EVENTS_SUBJECTS, stream=EVENTS_STREAM, config=config, handle=apply, stop=halt)
                finally:
                    halt.set()
    finally:
        await leases.release(LEASE)
    if not stop.is_set():
        raise LeaseLost("the indexer lease was lost; waiting to take it again")


class LeaseLost(RuntimeError):
    """Another replica holds the indexer lease now (the supervisor restarts this one as a standby)."""


async def _lead(leases: LeaseTable, settings: Settings, stop: asyncio.Event) -> bool:
    """Wait until this replica holds the indexer lease (False: stopped first)."""
    while not await leases.claim(LEASE):
        if await wait_event(stop, settings.lease_renew_seconds):
            return False
    log.info("indexer lease taken by %s", leases.holder)
    return True


async def _keep_lease(leases: LeaseTable, settings: Settings, stop: asyncio.Event, halt: asyncio.Event) -> None:
    """Renew the lease until ``stop``; set ``halt`` when stopping or when the lease is lost."""
    try:
        while not await wait_event(stop, settings.lease_renew_seconds) and not halt.is_set():
            if not await leases.renew(LEASE):
                log.warning("indexer lease lost: another replica takes over")
                return
    finally:
        halt.set()


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
