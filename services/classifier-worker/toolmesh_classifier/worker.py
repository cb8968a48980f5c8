"""The classifier-worker: a durable consumer of ``tools.discovered`` publishing ``tools.classified``.

Replicas share the durable consumer (each snapshot goes to one of them). A snapshot is cut into
batches of 10 tools, at most 5 classified at once (BR-004, EC-006); each batch becomes one
``ToolsClassified`` event whose id derives from the snapshot's, so a redelivered snapshot
publishes duplicates JetStream drops. While this worker is down the consumer keeps its place:
tools stay searchable unclassified and are classified when it returns (EC-009).
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from toolmesh.bus.consuming import consume
from toolmesh.bus.publishing import publish_event
from toolmesh.contracts.events import EVENTS_STREAM, DiscoveredTool, ToolsClassified, ToolsDiscovered
from toolmesh.errors import ToolmeshError
from toolmesh_classifier.classifiers import Classifier

log = logging.getLogger("toolmesh.classifier")
DURABLE = "classifier"
BATCH_SIZE = 10
CONCURRENT_BATCHES = 5
RETRY_DELAY_SECONDS = 15.0
_IDS = uuid.UUID("0c6f1d8e-8b7e-4c59-a1f4-3f3f1f2b9e77")


def consumer_config() -> ConsumerConfig:
    """Every discovery since the stream began, handed out to whichever replica is free."""
    return ConsumerConfig(
        durable_name=DURABLE,
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT,
        max_ack_pending=CONCURRENT_BATCHES,
        ack_wait=120,
        filter_subject=ToolsDiscovered.subject,
    )


def batches(tools: list[DiscoveredTool], size: int = BATCH_SIZE) -> list[list[DiscoveredTool]]:
    """Tools in consecutive batches of ``size``."""
    return [tools[i : i + size] for i in range(0, len(tools), size)]


async def classify_snapshot(
    js: JetStreamContext, classifier: Classifier, event: ToolsDiscovered, *, limit: int = CONCURRENT_BATCHES
) -> int:
    """Classify one snapshot batch by batch and publish the results; returns the number of events."""
    gate = asyncio.Semaphore(limit)

    async def one(number: int, batch: list[DiscoveredTool]) -> None:
        async with gate:
            results = await classifier.classify(event.server_name, batch)
            await publish_event(
                js,
                ToolsClassified(
                    event_id=str(uuid.uuid5(_IDS, f"{event.event_id}:{number}:{classifier.name}")),
                    server_id=event.server_id,
                    server_name=event.server_name,
                    classifier=classifier.name,
                    tools=results,
                ),
            )

    parts = batches(event.tools)
    async with asyncio.TaskGroup() as group:
        for number, batch in enumerate(parts):
            group.create_task(one(number, batch))
    return len(parts)


async def run_classifier(js: JetStreamContext, classifier: Classifier, stop: asyncio.Event) -> None:
    """Classify discovered tools until ``stop`` is set."""

    async def handle(msg: Msg) -> None:
        await _handle(js, classifier, msg)

    await consume(js, ToolsDiscovered.subject, stream=EVENTS_STREAM, config=consumer_config(), handle=handle, stop=stop)


async def _handle(js: JetStreamContext, classifier: Classifier, msg: Msg) -> None:
    try:
        event = ToolsDiscovered.model_validate_json(msg.data)
    except ValidationError as exc:
        log.error("malformed tools.discovered skipped: %s", exc)
        await msg.term()
        return
    try:
        count = await classify_snapshot(js, classifier, event)
    except ExceptionGroup as group:
        failures = group.subgroup(ToolmeshError)
        if failures is None or failures is not group:
            raise
        log.warning("classification of %s failed, retrying later: %s", event.server_name, failures.exceptions[0])
        await msg.nak(delay=RETRY_DELAY_SECONDS)
        return
    log.info("classified %d tools of %s in %d batches", len(event.tools), event.server_name, count)
    await msg.ack_sync()
