"""The pull loop every durable JetStream consumer of toolmesh runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig

from toolmesh.platform.telemetry import adopt_trace

POLL_SECONDS = 0.5
"""How long one fetch waits for messages before checking whether to stop."""


async def consume(
    js: JetStreamContext,
    subject: str,
    *,
    stream: str,
    config: ConsumerConfig,
    handle: Callable[[Msg], Awaitable[None]],
    stop: asyncio.Event,
    batch: int = 1,
) -> None:
    """Fetch from the durable consumer ``config.durable_name`` and pass each message (with its trace
    context adopted) to ``handle``, which acknowledges it, until ``stop`` is set."""
    sub = await js.pull_subscribe(subject, durable=config.durable_name, stream=stream, config=config)
    try:
        while not stop.is_set():
            try:
                messages = await sub.fetch(batch, timeout=POLL_SECONDS)
            except (NatsTimeout, TimeoutError):
                continue
            for msg in messages:
                adopt_trace(msg.headers)
                await handle(msg)
    finally:
        await sub.unsubscribe()
