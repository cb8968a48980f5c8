"""``NatsBus``: the ``Bus`` contract over a nats-py connection (a subscription's messages are nats-py ``Msg``s)."""

from __future__ import annotations

from nats.aio.client import Client as NATS

from toolmesh.platform.bus.interface import Callback, Subscription

PENDING_MSGS_LIMIT = 4096
"""Messages a subscription holds for its callback before NATS drops more (a slow consumer); nats-py's
own default (512 Ki messages, 128 MiB) is no bound in practice. A requester of a dropped message
hears nothing and times out, as it does when the receiver is gone."""
PENDING_BYTES_LIMIT = 64 * 1024 * 1024
"""Bytes of those messages at most."""


class NatsBus:
    """Core messaging over ``nc``; nats-py's errors are the contract's, so nothing is translated."""

    def __init__(self, nc: NATS) -> None:
        self.nc = nc

    @property
    def max_payload(self) -> int:
        """The server's payload limit (as nats-py learnt it when connecting)."""
        return self.nc.max_payload

    @property
    def is_connected(self) -> bool:
        """Whether the connection is up."""
        return self.nc.is_connected

    async def request(
        self, subject: str, data: bytes, *, headers: dict[str, str] | None = None, timeout: float
    ) -> bytes:
        """The first reply's data."""
        msg = await self.nc.request(subject, data, timeout=timeout, headers=headers)
        return msg.data

    async def publish(self, subject: str, data: bytes, *, headers: dict[str, str] | None = None) -> None:
        """Publish without a reply subject."""
        await self.nc.publish(subject, data, headers=headers)

    async def subscribe(self, subject: str, cb: Callback, *, queue: str = "", owned: bool = False) -> Subscription:
        """A nats-py subscription calling ``cb`` (``owned`` changes nothing: every message crosses NATS)."""
        return await self.nc.subscribe(
            subject,
            queue=queue,
            cb=cb,
            pending_msgs_limit=PENDING_MSGS_LIMIT,
            pending_bytes_limit=PENDING_BYTES_LIMIT,
        )
