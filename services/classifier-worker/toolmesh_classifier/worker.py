"""The classifier-worker: a durable consumer of ``tools.discovered`` publishing ``tools.classified``.

Replicas share the durable consumer (each snapshot goes to one of them). A snapshot is cut into
batches of 10 tools, at most 5 classified at once (BR-004, EC-006); each batch becomes one
``ToolsClassified`` event whose id derives from the snapshot's, so a redelivered snapshot
publishes duplicates JetStream drops. While this worker is down the consumer keeps its place:
tools stay searchable unclassified and are classified when it returns (EC-009). A batch that
fails (an LLM endpoint down) is tried again on a growing pause; after
``TOOLMESH_CLASSIFICATION_MAX_ATTEMPTS`` its tools are UNCLASSIFIED (``tools.unclassified``) until
a ``ClassifyTools`` command (``POST .../tools/classify``) asks again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from toolmesh.contracts.commands import COMMANDS_STREAM, ClassifyTools
from toolmesh.contracts.events import (
    EVENTS_STREAM,
    DiscoveredTool,
    ToolsClassified,
    ToolsDiscovered,
    ToolsUnclassified,
)
from toolmesh.errors import ToolmeshError
from toolmesh.platform.backoff import scheduled_delay
from toolmesh.platform.bus.consuming import consume
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.config import Settings
from toolmesh_classifier.classifiers import Classifier

log = logging.getLogger("toolmesh.classifier")
DURABLE = "classifier"
BATCH_SIZE = 10
CONCURRENT_BATCHES = 5
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


def command_config() -> ConsumerConfig:
    """Retries asked for by ``POST .../tools/classify`` (commands: a work queue, each taken once)."""
    return ConsumerConfig(
        durable_name=f"{DURABLE}-retries",
        ack_policy=AckPolicy.EXPLICIT,
        max_ack_pending=CONCURRENT_BATCHES,
        ack_wait=120,
        filter_subject=ClassifyTools.subject,
    )


def batches(tools: list[DiscoveredTool], size: int = BATCH_SIZE) -> list[list[DiscoveredTool]]:
    """Tools in consecutive batches of ``size``."""
    return [tools[i : i + size] for i in range(0, len(tools), size)]


@dataclass(frozen=True)
class Snapshot:
    """What one classification job is about: a discovery snapshot, or a retry command."""

    key: str  # names the job: result event ids derive from it (a redelivery publishes duplicates)
    server_id: str
    server_name: str
    namespace: str
    tools: list[DiscoveredTool]


async def classify_snapshot(
    js: JetStreamContext, classifier: Classifier, job: Snapshot, *, limit: int = CONCURRENT_BATCHES
) -> list[tuple[list[DiscoveredTool], ToolmeshError]]:
    """Classify one job batch by batch and publish each result; the batches that failed, with why."""
    gate = asyncio.Semaphore(limit)
    failed: list[tuple[list[DiscoveredTool], ToolmeshError]] = []

    async def one(number: int, batch: list[DiscoveredTool]) -> None:
        async with gate:
            try:
                results = await classifier.classify(job.server_name, batch)
            except ToolmeshError as exc:
                failed.append((batch, exc))
                return
            await publish_event(
                js,
                ToolsClassified(
                    event_id=str(uuid.uuid5(_IDS, f"{job.key}:{number}:{classifier.name}")),
                    server_id=job.server_id,
                    namespace=job.namespace,
                    server_name=job.server_name,
                    classifier=classifier.name,
                    tools=results,
                ),
            )

    async with asyncio.TaskGroup() as group:
        for number, batch in enumerate(batches(job.tools)):
            group.create_task(one(number, batch))
    return failed


async def run_classifier(js: JetStreamContext, classifier: Classifier, stop: asyncio.Event, settings: Settings) -> None:
    """Classify discovered tools (and retries asked for by command) until ``stop`` is set."""

    async def discovered(msg: Msg) -> None:
        try:
            event = ToolsDiscovered.model_validate_json(msg.data)
        except ValidationError as exc:
            log.error("malformed tools.discovered skipped: %s", exc)
            await msg.term()
            return
        job = Snapshot(event.event_id, event.server_id, event.server_name, event.namespace, event.tools)
        await _classify(js, classifier, msg, job, settings)

    async def retried(msg: Msg) -> None:
        try:
            command = ClassifyTools.model_validate_json(msg.data)
        except ValidationError as exc:
            log.error("malformed classify command dropped: %s", exc)
            await msg.term()
            return
        job = Snapshot(command.command_id, command.server_id, command.server_name, command.namespace, command.tools)
        await _classify(js, classifier, msg, job, settings)

    async with asyncio.TaskGroup() as group:
        group.create_task(
            consume(
                js,
                ToolsDiscovered.subject,
                stream=EVENTS_STREAM,
                config=consumer_config(),
                handle=discovered,
                stop=stop,
            )
        )
        group.create_task(
            consume(
                js, ClassifyTools.subject, stream=COMMANDS_STREAM, config=command_config(), handle=retried, stop=stop
            )
        )


async def _classify(js: JetStreamContext, classifier: Classifier, msg: Msg, job: Snapshot, settings: Settings) -> None:
    """One delivery of a job: failed batches are tried again later, until the attempts run out (EC-009)."""
    failed = await classify_snapshot(js, classifier, job)
    if not failed:
        log.info("classified %d tools of %s", len(job.tools), job.server_name)
        await msg.ack_sync()
        return
    attempt = msg.metadata.num_delivered
    error = str(failed[0][1].detail)
    if attempt < settings.classification_max_attempts:
        delay = scheduled_delay(attempt, settings.classification_retry_seconds)
        log.warning(
            "classification of %s failed (attempt %d), again in %.0fs: %s", job.server_name, attempt, delay, error
        )
        await msg.nak(delay=delay)
        return
    names = [t.original_name for batch, _ in failed for t in batch]
    log.error(
        "classification of %d tools of %s gave up after %d attempts: %s", len(names), job.server_name, attempt, error
    )
    await publish_event(
        js,
        ToolsUnclassified(
            event_id=str(uuid.uuid5(_IDS, f"{job.key}:unclassified")),
            server_id=job.server_id,
            namespace=job.namespace,
            server_name=job.server_name,
            tools=names,
            error=error,
            attempts=attempt,
        ),
    )
    await msg.ack_sync()
