"""Task status notifications (``notifications/tasks`` of the Tasks extension) on 2026-07-28
``subscriptions/listen`` streams, whichever gateway replica runs the task and whichever one the
client listens on.

A listen request names tasks in ``notifications.taskIds`` (and must declare the extension: else
``-32021``). Its acknowledgement lists those of them that its caller started (principal and
namespace); any other id is left out, as a task that does not exist would be. Each listed task is
then sent as it is now (a ``DetailedTask``, as ``tasks/get`` shows it) and again whenever what a
client sees of it changes, until it ends. Every replica follows the records of the task bucket
(``TaskFeed``: one consumer of new changes; heartbeats live in keys of their own and are not
followed) and hands each change to the streams listening for that task on it; a stream sends only
records of its caller's. While a listened task is unfinished, the stream has it taken over when its
runner stopped (as a ``tasks/get`` would), so a client that only listens hears it end too. The same
stream carries the list changes it asked for, as the SDK's ``ListenHandler`` does (``TaskListen``
stands in for it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.streams.memory
import mcp_types
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, ServerEvent, event_matches, event_to_notification
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy
from nats.js.kv import KeyValue

from toolmesh.errors import ToolmeshError
from toolmesh.platform.bus.topology import TASKS_BUCKET, bucket_subjects
from toolmesh_gateway.front_door.client_links import Ctx, request_channel
from toolmesh_gateway.front_door.input_required import starter_of
from toolmesh_gateway.front_door.rpc_errors import nats_answers
from toolmesh_gateway.front_door.task_extension import declared, missing_extension
from toolmesh_gateway.front_door.task_records import TERMINAL, TaskRecords, detailed, parsed
from toolmesh_gateway.front_door.tasks import HEARTBEAT_SECONDS

log = logging.getLogger("toolmesh.gateway.tasks")
METHOD = "notifications/tasks"
FEED_HEARTBEAT_SECONDS = 5.0
MAX_TASKS_PER_STREAM = 100
"""The most tasks one listen stream may name."""
TaskChange = tuple[str, int, dict[str, Any]]
"""A task's record as changed: its id, the record's revision, the record (``{}``: gone)."""
Listener = Callable[[TaskChange], None]
Revive = Callable[[Ctx, str], Awaitable[None]]
"""Takes a task over if its runner stopped (``Tasks.revive``)."""


class TaskFeed:
    """The changes of the task records, as this replica hears them, for the streams listening here."""

    def __init__(self, js: JetStreamContext, kv: KeyValue) -> None:
        self._js = js
        self.records = TaskRecords(kv)
        self._listeners: dict[str, dict[object, Listener]] = {}
        self._subscription: Any = None
        self._stream, self._prefix = bucket_subjects(TASKS_BUCKET)

    async def start(self) -> None:
        """Follow the records' changes from now on (an ordered consumer: no gap, no replay)."""
        self._subscription = await self._js.subscribe(
            self._prefix + "*",  # one token: task ids, not their heartbeat keys
            stream=self._stream,
            cb=self._heard,
            ordered_consumer=True,
            idle_heartbeat=FEED_HEARTBEAT_SECONDS,  # so a consumer lost with its server is noticed and made anew
            deliver_policy=DeliverPolicy.NEW,
        )

    async def close(self) -> None:
        """Stop following."""
        if self._subscription is not None:
            try:
                await self._subscription.unsubscribe()
            except NatsError as exc:  # the connection closes anyway
                log.debug("task feed unsubscribe: %s", exc)
            self._subscription = None

    def subscribe(self, task_id: str, listener: Listener) -> Callable[[], None]:
        """Hand the changes of ``task_id`` to ``listener`` (synchronous, must not raise); the unsubscribe."""
        token = object()
        self._listeners.setdefault(task_id, {})[token] = listener

        def unsubscribe() -> None:
            listening = self._listeners.get(task_id, {})
            listening.pop(token, None)
            if not listening:
                self._listeners.pop(task_id, None)

        return unsubscribe

    async def _heard(self, msg: Msg) -> None:
        task_id = msg.subject[len(self._prefix) :]
        listening = self._listeners.get(task_id)
        if not listening:
            return
        change = (task_id, msg.metadata.sequence.stream, parsed(msg.data))  # a deletion or expiry: {}
        for listener in list(listening.values()):
            listener(change)


def _task_ids(notifications: mcp_types.SubscriptionFilter) -> list[str] | None:
    """The tasks a listen request names (None: it names none); ``-32602`` when that is not a list of ids."""
    wanted = (notifications.model_extra or {}).get("taskIds")
    if wanted is None:
        return None
    if not isinstance(wanted, list) or not all(isinstance(t, str) and t for t in wanted):
        raise MCPError(code=mcp_types.INVALID_PARAMS, message="notifications.taskIds must be a list of task ids")
    if len(wanted) > MAX_TASKS_PER_STREAM:
        words = f"a listen stream may name at most {MAX_TASKS_PER_STREAM} tasks"
        raise MCPError(code=mcp_types.INVALID_PARAMS, message=words)
    return list(dict.fromkeys(wanted))


def _honored(requested: mcp_types.SubscriptionFilter, tasks: list[str] | None) -> mcp_types.SubscriptionFilter:
    """What the stream agrees to send: every list change asked for, and the caller's own ``tasks``."""
    honored = mcp_types.SubscriptionFilter(
        tools_list_changed=True if requested.tools_list_changed else None,
        prompts_list_changed=True if requested.prompts_list_changed else None,
        resources_list_changed=True if requested.resources_list_changed else None,
        resource_subscriptions=list(requested.resource_subscriptions) if requested.resource_subscriptions else None,
    )
    if tasks is None:
        return honored
    return mcp_types.SubscriptionFilter.model_validate(
        {**honored.model_dump(by_alias=True, exclude_none=True), "taskIds": tasks}
    )


class TaskListen:
    """Serves ``subscriptions/listen``: one call is one stream of the list changes ``bus`` carries and of
    the status of the tasks it names (``feed``). Bounded as the SDK's ``ListenHandler``: at most
    ``max_subscriptions`` streams; a stream whose client stopped reading ends at ``max_buffered`` items."""

    def __init__(
        self,
        bus: SubscriptionBus,
        feed: TaskFeed,
        revive: Revive,
        *,
        max_subscriptions: int = 1024,
        max_buffered: int = 1024,
    ) -> None:
        self._bus = bus
        self._feed = feed
        self._revive = revive
        self._max_subscriptions = max_subscriptions
        self._max_buffered = max_buffered
        self._streams: set[anyio.streams.memory.MemoryObjectSendStream[ServerEvent | TaskChange]] = set()

    async def __call__(
        self, ctx: Ctx, params: mcp_types.SubscriptionsListenRequestParams
    ) -> mcp_types.SubscriptionsListenResult:
        """Serve one listen stream."""
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(mcp_types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        if len(self._streams) >= self._max_subscriptions:
            raise MCPError(mcp_types.INTERNAL_ERROR, "Subscription limit reached")
        wanted = _task_ids(params.notifications)
        if wanted and not declared(ctx):
            raise missing_extension("task status notifications on subscriptions/listen")
        lists = _honored(params.notifications, None)
        uris = frozenset(lists.resource_subscriptions or ())
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        send, recv = anyio.create_memory_object_stream[ServerEvent | TaskChange](self._max_buffered)

        def deliver(item: ServerEvent | TaskChange) -> None:
            if not isinstance(item, tuple) and not event_matches(lists, uris, item):
                return
            try:
                send.send_nowait(item)
            except anyio.ClosedResourceError:
                pass
            except anyio.WouldBlock:
                log.warning("listen stream %r backlog full; ending the stream", subscription_id)
                self._streams.discard(send)
                send.close()

        # Subscribed before anything is read or sent: a change meanwhile waits in the buffer.
        unsubscribes = [self._bus.subscribe(deliver)]
        unsubscribes += [self._feed.subscribe(task_id, deliver) for task_id in wanted or ()]
        self._streams.add(send)
        try:
            who = starter_of(ctx)
            seen: dict[str, tuple[int, dict[str, Any]]] = {}  # the caller's tasks: revision and view last sent
            with nats_answers("reading a task"):
                for task_id in wanted or ():
                    revision, record = await self._feed.records.entry(task_id)
                    if record.get("starter") and record["starter"] == who:
                        seen[task_id] = (revision, record)
                    elif record.get("starter"):
                        log.warning("security: a task was listened for by a principal that did not start it")
            acknowledged = _honored(params.notifications, list(seen) if wanted is not None else None)
            ack = mcp_types.SubscriptionsAcknowledgedNotificationParams(notifications=acknowledged, _meta=meta)
            await ctx.session.send_notification(
                mcp_types.SubscriptionsAcknowledgedNotification(params=ack), related_request_id=subscription_id
            )
            channel = request_channel(ctx)
            for task_id, (revision, record) in list(seen.items()):
                seen[task_id] = (revision, detailed(record))
                await channel.notify(METHOD, {**detailed(record), "_meta": meta})
            async with anyio.create_task_group() as group:
                group.start_soon(self._runners, ctx, seen)
                async for item in recv:
                    if not isinstance(item, tuple):
                        await ctx.session.send_notification(
                            event_to_notification(item, meta), related_request_id=subscription_id
                        )
                        continue
                    task_id, revision, record = item
                    last = seen.get(task_id)
                    if last is None or revision <= last[0] or record.get("starter") != who:
                        continue  # not the caller's, older than what it was sent, or gone
                    shown = detailed(record)
                    seen[task_id] = (revision, shown)
                    if shown != last[1]:
                        await channel.notify(METHOD, {**shown, "_meta": meta})
                group.cancel_scope.cancel()
        finally:
            for unsubscribe in unsubscribes:
                unsubscribe()
            self._streams.discard(send)
            send.close()
            recv.close()
        return mcp_types.SubscriptionsListenResult(_meta=meta)

    async def _runners(self, ctx: Ctx, seen: dict[str, tuple[int, dict[str, Any]]]) -> None:
        """Have the unfinished tasks of a stream taken over when their runner stopped, now and then."""
        while True:
            for task_id, (_, shown) in list(seen.items()):
                if shown.get("status") in TERMINAL:
                    continue
                try:
                    await self._revive(ctx, task_id)
                except (NatsError, ToolmeshError, MCPError) as exc:  # the next round tries again
                    log.warning("a listened task could not be taken over: %s", type(exc).__name__)
            await anyio.sleep(HEARTBEAT_SECONDS)
