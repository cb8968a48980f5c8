"""Publishing events and commands; returns the stream sequence so writers can wait for it."""

from __future__ import annotations

import time

from nats.js import JetStreamContext
from nats.js.errors import NoStreamResponseError

from toolmesh.contracts.commands import Command
from toolmesh.contracts.events import Event
from toolmesh.errors import BackendUnavailable
from toolmesh.platform.polling import poll_until
from toolmesh.platform.telemetry import outgoing_headers

RETRY_SECONDS = (0.1, 0.5)
"""First and longest pause between appends that no stream answered."""


async def _append(js: JetStreamContext, subject: str, data: bytes, message_id: str, timeout: float) -> int:
    """Append ``data`` with ``message_id`` (JetStream drops a second copy within the duplicate window) and
    return its stream sequence. When no stream answers (its leader is being elected after a JetStream
    server went away, in a cluster) the append is repeated until ``timeout``, then ``BackendUnavailable``."""
    headers = outgoing_headers({"Nats-Msg-Id": message_id})
    deadline = time.monotonic() + timeout

    async def append() -> int:
        ack = await js.publish(subject, data, timeout=max(deadline - time.monotonic(), 0.1), headers=headers)
        return int(ack.seq)

    seq = await poll_until(
        append, timeout, interval=RETRY_SECONDS[0], max_interval=RETRY_SECONDS[1], retry_on=(NoStreamResponseError,)
    )
    if seq is None:
        raise BackendUnavailable(f"no JetStream stream took {subject} within {timeout}s (no stream leader)")
    return seq


async def publish_event(js: JetStreamContext, event: Event, *, timeout: float = 5.0) -> int:
    """Append an event (deduplicated by ``event_id``) and return its stream sequence."""
    return await _append(js, event.subject, event.model_dump_json().encode(), event.event_id, timeout)


async def publish_command(js: JetStreamContext, command: Command, *, timeout: float = 5.0) -> int:
    """Queue a command (deduplicated by ``command_id``, the idempotency key)."""
    return await _append(js, command.subject, command.model_dump_json().encode(), command.command_id, timeout)
