"""The live feed of ``GET /api/v1/events``: one subscription to the event stream per gateway,
fanned out to every open stream of this replica, each filtered to what its caller may see.

A stream whose reader falls ``QUEUE_SIZE`` events behind is ended rather than left to grow: its
client reconnects and loads the state again (the contract of ``toolmesh.contracts.stream``). A
revoked key's streams end with the event that revokes it; every stream ends when the gateway stops.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from toolmesh.contracts.approvals import ApprovalDecided, ApprovalRequested
from toolmesh.contracts.event_types import decode_event
from toolmesh.contracts.events import EVENTS_STREAM, EVENTS_SUBJECTS, Event, ServerRegistered, ToolsDiscovered
from toolmesh.contracts.namespace_events import AppConnected, AppDisconnected, CallsRecorded, KeyCreated, KeyRevoked
from toolmesh.contracts.policies import PolicyDeleted, PolicySaved
from toolmesh.contracts.quotas import QuotaChange
from toolmesh.contracts.stream import EVENT_PREFIX, StreamedEvent
from toolmesh.secret_text import mask_url
from toolmesh_gateway.auth import Principal

log = logging.getLogger("toolmesh.gateway.events")
QUEUE_SIZE = 512
ENVELOPE = {"event_id", "occurred_at", "server_id", "namespace", "schema_version", "actor"}
PRIVATE = {"sealed_config", "ip_address"}
"""Fields that never leave the gateway on this stream."""
FOR_MANAGERS = (
    KeyCreated,
    KeyRevoked,
    AppConnected,
    AppDisconnected,
    CallsRecorded,
    ApprovalRequested,
    ApprovalDecided,
    PolicySaved,
    PolicyDeleted,
    QuotaChange,
)
"""Events only admins and the owner receive (users may not read keys, approvals, policies, quota changes or
the audit log)."""


def visible(event: Event, scope: str | None, manages: bool) -> bool:
    """Whether a caller working in ``scope`` (None: every namespace) may receive ``event``."""
    if scope is not None and event.namespace != scope:
        return False
    return manages or not isinstance(event, FOR_MANAGERS)


def streamed(event: Event, seq: int) -> StreamedEvent:
    """``event`` as the stream carries it: private fields left out, a tool snapshot summarised."""
    data: dict[str, Any] = event.model_dump(mode="json", exclude=ENVELOPE | PRIVATE)
    if isinstance(event, ServerRegistered) and event.health_check_url:
        data["health_check_url"] = mask_url(event.health_check_url)
    if isinstance(event, ToolsDiscovered):
        data["tools"] = [t.original_name for t in event.tools]
        data["tool_count"] = len(event.tools)
    return StreamedEvent(
        seq=seq,
        type=event.subject.removeprefix(EVENT_PREFIX),
        event_id=event.event_id,
        occurred_at=event.occurred_at,
        namespace=event.namespace,
        server_id=event.server_id,
        actor=event.actor,
        data=data,
    )


class Subscription:
    """One open stream: the events its caller may see, in order; ``None`` ends it."""

    def __init__(self, principal: Principal, scope: str | None, size: int = QUEUE_SIZE) -> None:
        self.principal = principal
        self.scope = scope
        self.ended = False
        self._queue: asyncio.Queue[StreamedEvent | None] = asyncio.Queue(size)

    def offer(self, item: StreamedEvent) -> None:
        """Queue an event; a reader that fell a whole queue behind is ended instead."""
        if self.ended:
            return
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            log.info("event stream of %s fell behind and was ended", self.principal.name)
            self.end()

    def end(self) -> None:
        """End the stream after what is queued (or at once, when the queue is full)."""
        if self.ended:
            return
        self.ended = True
        if self._queue.full():
            while not self._queue.empty():
                self._queue.get_nowait()
        self._queue.put_nowait(None)

    async def next(self) -> StreamedEvent | None:
        """The next event, or None when the stream is over."""
        return await self._queue.get()


class EventHub:
    """Follows the event stream from now on and hands each event to the subscriptions that may see it."""

    def __init__(self, js: JetStreamContext) -> None:
        self._js = js
        self._sub: JetStreamContext.PushSubscription | None = None
        self._subscriptions: set[Subscription] = set()

    async def start(self) -> None:
        """Subscribe to new events (an ordered consumer: no state on the server to clean up)."""
        self._sub = await self._js.subscribe(
            EVENTS_SUBJECTS,
            stream=EVENTS_STREAM,
            cb=self._on_message,
            ordered_consumer=True,
            config=ConsumerConfig(deliver_policy=DeliverPolicy.NEW),
        )

    def open(self, principal: Principal, scope: str | None) -> Subscription:
        """A new subscription; events published from now on reach it."""
        subscription = Subscription(principal, scope)
        self._subscriptions.add(subscription)
        return subscription

    def release(self, subscription: Subscription) -> None:
        """Forget a subscription whose stream is closed."""
        subscription.end()
        self._subscriptions.discard(subscription)

    def end_all(self) -> None:
        """End every open stream (the gateway is stopping)."""
        for subscription in list(self._subscriptions):
            self.release(subscription)

    @property
    def open_streams(self) -> int:
        """How many streams are open on this replica."""
        return len(self._subscriptions)

    async def close(self) -> None:
        """End every stream and stop following the event stream."""
        self.end_all()
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception as exc:  # the connection may already be closed; nothing left to release
                log.debug("event hub unsubscribe failed: %s", exc)

    async def _on_message(self, msg: Msg) -> None:
        if not self._subscriptions:
            return
        try:
            event = decode_event(msg.subject, msg.data)
        except ValidationError as exc:
            log.error("event on %s is malformed and was not streamed: %s", msg.subject, exc)
            return
        if event is None:
            return
        item = streamed(event, msg.metadata.sequence.stream)
        for subscription in list(self._subscriptions):
            if visible(event, subscription.scope, subscription.principal.manages):
                subscription.offer(item)
            if isinstance(event, KeyRevoked) and subscription.principal.key_id == event.key_id:
                self.release(subscription)
