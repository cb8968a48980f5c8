"""``InProcessBus``: the ``Bus`` contract as an in-memory subject router, for one process.

Subjects are dot-separated tokens; a subscription's subject may use ``*`` (one token) and ``>``
(one or more trailing tokens). A message goes to every plain subscription it matches and to one
member of each queue group it matches: the member that joined last (NATS picks one at random; the
newest is the one a handover of a subject to a new subscriber means). Each subscription delivers
its messages one at a time, in order, from a task of its own running in a fresh
``contextvars.Context``, as nats-py runs a subscription's callback: a handler never sees its
sender's context vars. A request takes the first reply; with no subscription it fails with
``NoRespondersError``, without a reply in time with ``TimeoutError``, and a message (or reply) over
``max_payload`` with ``MaxPayloadError`` (nats-py's errors). Nothing is encoded or copied.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging

from nats.errors import MaxPayloadError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from toolmesh.platform.bus.interface import Callback

log = logging.getLogger("toolmesh.bus")
DEFAULT_MAX_PAYLOAD = 1024 * 1024
"""NATS's default payload limit."""
ROUTES_CACHED = 4096
"""Subjects whose receivers are remembered (the cache is emptied when it grows past this)."""


class InProcessMessage:
    """A message delivered in-process; ``respond`` resolves the requester's wait (a late answer is dropped)."""

    __slots__ = ("_answer", "_limit", "data", "headers", "reply", "subject")

    def __init__(
        self,
        subject: str,
        data: bytes,
        headers: dict[str, str] | None,
        answer: asyncio.Future[bytes] | None,
        limit: int,
    ) -> None:
        self.subject = subject
        self.data = data
        self.headers = headers
        self.reply = "_INBOX.in-process" if answer is not None else ""
        self._answer = answer
        self._limit = limit

    async def respond(self, data: bytes) -> None:
        """Answer the request (``MaxPayloadError`` over the bus's limit, as over NATS)."""
        if len(data) > self._limit:
            raise MaxPayloadError
        if self._answer is not None and not self._answer.done():  # the requester may have stopped waiting
            self._answer.set_result(data)


def matches(pattern: tuple[str, ...], tokens: list[str]) -> bool:
    """Whether a subject's ``tokens`` match a subscription's ``pattern`` (with ``*`` and ``>``)."""
    for index, token in enumerate(pattern):
        if token == ">":
            return len(tokens) > index
        if index >= len(tokens) or (token != "*" and token != tokens[index]):
            return False
    return len(pattern) == len(tokens)


class InProcessSubscription:
    """One subscription: its messages wait in a queue for its delivery task."""

    def __init__(self, bus: InProcessBus, subject: str, cb: Callback, queue: str) -> None:
        self.pattern = tuple(subject.split("."))
        self.queue = queue
        self._bus = bus
        self._cb = cb
        self._inbox: asyncio.Queue[InProcessMessage | None] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._deliver(), context=contextvars.Context())

    def put(self, message: InProcessMessage) -> None:
        """Queue ``message`` for the callback."""
        self._inbox.put_nowait(message)

    async def _deliver(self) -> None:
        while (message := await self._inbox.get()) is not None:
            try:
                await self._cb(message)
            except Exception:  # as nats-py: a failing callback does not end the subscription
                log.exception("subscription callback failed", extra={"subject": message.subject})

    async def drain(self) -> None:
        """Stop receiving; return once the messages queued before are handled."""
        self._bus.remove(self)
        self._inbox.put_nowait(None)
        if self._task is not asyncio.current_task():
            await asyncio.wait({self._task})

    async def unsubscribe(self) -> None:
        """Stop receiving; messages not yet delivered are dropped."""
        self._bus.remove(self)
        if self._task is asyncio.current_task():  # unsubscribing from its own callback: end after it
            self._inbox = asyncio.Queue()
            self._inbox.put_nowait(None)
        else:
            self._task.cancel()


class InProcessBus:
    """Core messaging between the subscriptions of one process (see the module's docstring)."""

    def __init__(self, *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> None:
        self._max_payload = max_payload
        self._subscriptions: list[InProcessSubscription] = []
        self._routes: dict[str, tuple[InProcessSubscription, ...]] = {}
        self._closed = False

    @property
    def max_payload(self) -> int:
        """The payload limit of a message and of a reply."""
        return self._max_payload

    @property
    def is_connected(self) -> bool:
        """True until ``close``."""
        return not self._closed

    def receivers(self, subject: str) -> tuple[InProcessSubscription, ...]:
        """The subscriptions a message on ``subject`` goes to."""
        found = self._routes.get(subject)
        if found is None:
            found = self._route(subject)
            if len(self._routes) >= ROUTES_CACHED:
                self._routes.clear()
            self._routes[subject] = found
        return found

    def _route(self, subject: str) -> tuple[InProcessSubscription, ...]:
        tokens = subject.split(".")
        plain: list[InProcessSubscription] = []
        groups: dict[str, InProcessSubscription] = {}
        for sub in self._subscriptions:  # in the order they joined: a group's last match is its newest
            if matches(sub.pattern, tokens):
                if sub.queue:
                    groups[sub.queue] = sub
                else:
                    plain.append(sub)
        return (*plain, *groups.values())

    def _message(
        self, subject: str, data: bytes, headers: dict[str, str] | None, answer: asyncio.Future[bytes] | None
    ) -> InProcessMessage:
        if len(data) > self._max_payload:
            raise MaxPayloadError
        return InProcessMessage(subject, data, headers, answer, self._max_payload)

    async def request(
        self, subject: str, data: bytes, *, headers: dict[str, str] | None = None, timeout: float
    ) -> bytes:
        """The first reply's data."""
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        message = self._message(subject, data, headers, answer)
        receivers = self.receivers(subject)
        if not receivers:
            raise NoRespondersError
        for sub in receivers:
            sub.put(message)
        try:
            return await asyncio.wait_for(answer, timeout)
        except TimeoutError as exc:
            raise NatsTimeout from exc

    async def publish(self, subject: str, data: bytes, *, headers: dict[str, str] | None = None) -> None:
        """Queue the message for every receiver (none is fine)."""
        message = self._message(subject, data, headers, None)
        for sub in self.receivers(subject):
            sub.put(message)

    async def subscribe(
        self, subject: str, cb: Callback, *, queue: str = "", owned: bool = False
    ) -> InProcessSubscription:
        """A subscription calling ``cb`` (every subscription here is local: ``owned`` changes nothing)."""
        sub = InProcessSubscription(self, subject, cb, queue)
        self._subscriptions.append(sub)
        self._routes.clear()
        return sub

    def remove(self, sub: InProcessSubscription) -> None:
        """Route nothing more to ``sub``."""
        if sub in self._subscriptions:
            self._subscriptions.remove(sub)
            self._routes.clear()

    async def close(self) -> None:
        """End every subscription; the bus sends nothing more."""
        self._closed = True
        for sub in list(self._subscriptions):
            await sub.unsubscribe()
