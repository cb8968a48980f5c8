"""The contract of core NATS messaging (request/reply and pub/sub, not JetStream) that toolmesh codes against.

Three implementations keep it, under one contract test suite (tests/integration/test_bus_contract.py):
``NatsBus`` (a nats-py connection), ``InProcessBus`` (an in-memory subject router, for fast handler
tests) and ``LocalFirstBus`` (NATS, with the subjects this process owns answered in-process).

* ``request`` returns the reply's data (bytes): no caller reads anything else of a reply.
* A subscription's callback gets a ``Message`` and runs once at a time per subscription, in a
  context of its own (not the publisher's), as nats-py runs subscription callbacks.
* Errors are nats-py's, on every implementation (callers already handle them):
  ``nats.errors.NoRespondersError`` (a request nobody subscribes to), ``nats.errors.TimeoutError``
  (no reply in time), ``nats.errors.MaxPayloadError`` (a message over ``max_payload``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol


class Message(Protocol):
    """A received message: a nats-py ``Msg`` or an in-process one; ``respond`` answers a request
    (only when ``reply`` is set: a published message has none)."""

    subject: str
    data: bytes
    reply: str

    @property
    def headers(self) -> dict[str, str] | None: ...

    async def respond(self, data: bytes) -> None: ...


Callback = Callable[[Message], Awaitable[None]]
"""A subscription's callback."""


class Subscription(Protocol):
    """What ``subscribe`` returns: stop receiving with ``unsubscribe`` (at once) or ``drain``."""

    async def unsubscribe(self) -> None: ...

    async def drain(self) -> None:
        """Stop receiving, and return once the messages received before are handled."""
        ...


class Bus(Protocol):
    """Core messaging: requests, publishes and subscriptions on subjects (``*`` and ``>`` wildcards)."""

    @property
    def max_payload(self) -> int:
        """The largest message (data) the bus carries, in bytes."""
        ...

    @property
    def is_connected(self) -> bool:
        """Whether messages can be sent now."""
        ...

    async def request(
        self, subject: str, data: bytes, *, headers: dict[str, str] | None = None, timeout: float
    ) -> bytes:
        """The data of the first reply to ``data`` sent on ``subject``."""
        ...

    async def publish(self, subject: str, data: bytes, *, headers: dict[str, str] | None = None) -> None:
        """Send ``data`` on ``subject`` without waiting for anything."""
        ...

    async def subscribe(self, subject: str, cb: Callback, *, queue: str = "", owned: bool = False) -> Subscription:
        """Call ``cb`` with each message on ``subject``; in a ``queue`` group, one member gets each message.

        ``owned`` promises that this subscription is the only one on these subjects anywhere (a lease
        holder's ``toolmesh.rpc.<server_id>.*``, a gateway replica's ``toolmesh.client.<replica>.*``):
        a bus may then hand this process's own messages on them over without the network."""
        ...
