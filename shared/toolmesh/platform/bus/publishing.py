"""Publishing events and commands; returns the stream sequence so writers can wait for it."""

from __future__ import annotations

from nats.js import JetStreamContext

from toolmesh.contracts.commands import Command
from toolmesh.contracts.events import Event
from toolmesh.platform.telemetry import outgoing_headers


async def publish_event(js: JetStreamContext, event: Event, *, timeout: float = 5.0) -> int:
    """Append an event (deduplicated by ``event_id``) and return its stream sequence."""
    headers = outgoing_headers({"Nats-Msg-Id": event.event_id})
    ack = await js.publish(event.subject, event.model_dump_json().encode(), timeout=timeout, headers=headers)
    return int(ack.seq)


async def publish_command(js: JetStreamContext, command: Command, *, timeout: float = 5.0) -> int:
    """Queue a command (deduplicated by ``command_id``, the idempotency key)."""
    headers = outgoing_headers({"Nats-Msg-Id": command.command_id})
    ack = await js.publish(command.subject, command.model_dump_json().encode(), timeout=timeout, headers=headers)
    return int(ack.seq)
