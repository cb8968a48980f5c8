"""Owners of servers that run in this process: a request to one of them skips the bus.

When the gateway and the session-worker holding a server share one process and one NATS connection
(``toolmesh up``), a request to the owner is handed to the owner's handler directly instead of
going out to NATS and back (measured with bench/routing.py: two socket writes, two reads and the
server's routing per call). The owner sees the same request it would get from the bus
(``LocalRequest`` has the subject, data, headers and reply of a NATS message, and the handler runs
in a context of its own, as a subscription callback does), so it answers both the same way, and a
request over the connection's payload limit fails on both. A request takes the shortcut only while
the connection is up: with NATS down, it fails as it would between processes. A message without a
reply (``tell``: a cancel) always reaches a local owner, so the cancel of a call that went the
short way never waits for a reconnect.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from nats.aio.client import Client as NATS
from nats.errors import MaxPayloadError
from nats.errors import TimeoutError as NatsTimeout

from toolmesh.bus.verbs import RPC


class OwnerRequest(Protocol):
    """What an owner reads of a request: a NATS ``Msg`` or a ``LocalRequest``."""

    subject: str
    data: bytes
    reply: str

    @property
    def headers(self) -> dict[str, str] | None: ...

    async def respond(self, data: bytes) -> None: ...


Handler = Callable[[OwnerRequest], Coroutine[Any, Any, None]]
"""An owner's subscription callback: takes a request, answers it (later) with ``respond``."""


class LocalRequest:
    """A request handed to an owner in this process; ``respond`` resolves the requester's wait."""

    def __init__(self, subject: str, data: bytes, headers: dict[str, str] | None, *, wants_reply: bool) -> None:
        self.subject = subject
        self.data = data
        self.headers = headers
        self.reply = "local" if wants_reply else ""  # the owner replies only when there is a reply subject
        self.answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def respond(self, data: bytes) -> None:
        if not self.answer.done():  # the requester may have stopped waiting
            self.answer.set_result(data)


_owners: weakref.WeakKeyDictionary[NATS, dict[str, Handler]] = weakref.WeakKeyDictionary()


def register(nc: NATS, server_id: str, handler: Handler) -> None:
    """Requests on ``nc`` for ``server_id`` go to ``handler`` (besides its subscription on the bus)."""
    _owners.setdefault(nc, {})[server_id] = handler


def unregister(nc: NATS, server_id: str, handler: Handler) -> None:
    """``handler`` no longer owns the server (an owner registered after it stays)."""
    owners = _owners.get(nc, {})
    if owners.get(server_id) is handler:
        del owners[server_id]


def _owner(nc: NATS, server_id: str) -> Handler | None:
    return _owners.get(nc, {}).get(server_id)


def is_local(nc: NATS, server_id: str) -> bool:
    """Whether a request to the server takes the shortcut: its owner runs in this process on
    ``nc``, and the connection is up."""
    return nc.is_connected and _owner(nc, server_id) is not None


def holds(nc: NATS, server_id: str) -> bool:
    """Whether the server's owner runs in this process on ``nc`` (connected or not): where ``tell`` goes."""
    return _owner(nc, server_id) is not None


async def _hand_over(nc: NATS, handler: Handler, message: LocalRequest) -> None:
    """Give ``message`` to ``handler`` as the bus would: within the payload limit, in a fresh context."""
    if len(message.data) > nc.max_payload:
        raise MaxPayloadError
    await asyncio.get_running_loop().create_task(handler(message), context=contextvars.Context())


async def request(
    nc: NATS, server_id: str, verb: str, payload: bytes, headers: dict[str, str] | None, *, timeout: float
) -> bytes:
    """The local owner's reply to one request; ``nats.errors.TimeoutError`` when none comes in time,
    as ``nc.request`` would raise. Call only when ``is_local``."""
    handler = _owner(nc, server_id)
    assert handler is not None, "request() needs a local owner (is_local)"
    message = LocalRequest(RPC.subject(server_id, verb), payload, headers, wants_reply=True)
    await _hand_over(nc, handler, message)
    try:
        return await asyncio.wait_for(message.answer, timeout)
    except TimeoutError as exc:
        raise NatsTimeout from exc


async def tell(nc: NATS, server_id: str, verb: str, payload: bytes, headers: dict[str, str] | None) -> None:
    """Hand the local owner a request that expects no reply. Call only when ``holds``."""
    handler = _owner(nc, server_id)
    assert handler is not None, "tell() needs a local owner (holds)"
    await _hand_over(nc, handler, LocalRequest(RPC.subject(server_id, verb), payload, headers, wants_reply=False))
