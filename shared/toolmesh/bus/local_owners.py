"""Owners of servers that run in this process: a request to one of them skips the bus.

When the gateway and the session-worker holding a server share one process and one NATS connection
(``toolmesh up``), a request to the owner is handed to the owner's handler directly instead of
going out to NATS and back (measured with bench/routing.py: two socket writes, two reads and the
server's routing per call). The owner sees the same request it would get from the bus
(``LocalRequest`` has the subject, data, headers and reply of a NATS message), so it answers both
the same way. The shortcut is taken only while the connection is up: with NATS down, a request
fails as it would between processes.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Protocol

from nats.aio.client import Client as NATS
from nats.errors import TimeoutError as NatsTimeout

from toolmesh.contracts.rpc import rpc_subject


class OwnerRequest(Protocol):
    """What an owner reads of a request: a NATS ``Msg`` or a ``LocalRequest``."""

    subject: str
    data: bytes
    reply: str

    @property
    def headers(self) -> dict[str, str] | None: ...

    async def respond(self, data: bytes) -> None: ...


Handler = Callable[[OwnerRequest], Awaitable[None]]
"""An owner's subscription callback: takes a request, answers it (later) with ``respond``."""


class LocalRequest:
    """A request handed to an owner in this process; ``respond`` resolves the requester's wait."""

    def __init__(self, subject: str, data: bytes, headers: dict[str, str] | None, *, wants_reply: bool) -> None:
        self.subject = subject
        self.data = data
        self._headers = headers
        self.reply = "local" if wants_reply else ""  # the owner replies only when there is a reply subject
        self.answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    @property
    def headers(self) -> dict[str, str] | None:
        return self._headers

    async def respond(self, data: bytes) -> None:
        if not self.answer.done():  # the requester may have stopped waiting
            self.answer.set_result(data)


_owners: weakref.WeakKeyDictionary[NATS, dict[str, Handler]] = weakref.WeakKeyDictionary()


def register(nc: NATS, server_id: str, handler: Handler) -> None:
    """Requests on ``nc`` for ``server_id`` go to ``handler`` (besides its subscription on the bus)."""
    _owners.setdefault(nc, {})[server_id] = handler


def unregister(nc: NATS, server_id: str) -> None:
    """The server is no longer owned in this process."""
    _owners.get(nc, {}).pop(server_id, None)


def _owner(nc: NATS, server_id: str) -> Handler | None:
    if not nc.is_connected:
        return None
    return _owners.get(nc, {}).get(server_id)


def is_local(nc: NATS, server_id: str) -> bool:
    """Whether the server's owner runs in this process on ``nc`` (and the connection is up)."""
    return _owner(nc, server_id) is not None


async def request(
    nc: NATS, server_id: str, verb: str, payload: bytes, headers: dict[str, str] | None, *, timeout: float
) -> bytes:
    """The local owner's reply to one request; ``nats.errors.TimeoutError`` when none comes in time,
    as ``nc.request`` would raise. Call only when ``is_local``."""
    handler = _owner(nc, server_id)
    assert handler is not None, "request() needs a local owner (is_local)"
    message = LocalRequest(rpc_subject(server_id, verb), payload, headers, wants_reply=True)
    await handler(message)
    try:
        return await asyncio.wait_for(message.answer, timeout)
    except TimeoutError as exc:
        raise NatsTimeout from exc


async def tell(nc: NATS, server_id: str, verb: str, payload: bytes, headers: dict[str, str] | None) -> None:
    """Hand the local owner a request that expects no reply. Call only when ``is_local``."""
    handler = _owner(nc, server_id)
    assert handler is not None, "tell() needs a local owner (is_local)"
    await handler(LocalRequest(rpc_subject(server_id, verb), payload, headers, wants_reply=False))
