"""``LocalFirstBus``: NATS, with the subjects this process owns answered without leaving the process.

When the gateway and the session-worker holding a server share one process and one NATS connection
(``toolmesh up``), a request to the owner is handed to the owner's callback directly instead of
going out to NATS and back (measured with bench/routing.py: two socket writes, two reads and the
server's routing per call); the same holds for server → client traffic to a gateway replica in
the process. A subscription made with ``owned=True`` is also registered in an ``InProcessBus``
(in one queue group: during a handover the newest owner gets the work). The owner sees the same
message it would get from NATS (subject, data, headers, reply; its callback runs in a context of
its own), so it answers both the same way, and a message over the connection's payload limit fails
on both. A request takes the shortcut only while the connection is up: with NATS down, it fails as
it would between processes. A message without a reply (a cancel) to an owned subject always stays
in the process, so the cancel of a call that went the short way never waits for a reconnect.
"""

from __future__ import annotations

from toolmesh.platform.bus.in_process import InProcessBus
from toolmesh.platform.bus.interface import Callback, Subscription
from toolmesh.platform.bus.nats_bus import NatsBus

OWNERS = "owners"
"""The in-process queue group of owned subscriptions."""


class OwnedSubscription:
    """An owned subscription: on NATS and in the process."""

    def __init__(self, remote: Subscription, local: Subscription) -> None:
        self._remote = remote
        self._local = local

    async def unsubscribe(self) -> None:
        """Stop receiving on both (a later owner of the same subjects stays)."""
        await self._local.unsubscribe()
        await self._remote.unsubscribe()

    async def drain(self) -> None:
        """Stop receiving on both once what each received is handled."""
        await self._local.drain()
        await self._remote.drain()


class LocalFirstBus:
    """The ``Bus`` of a process: ``remote`` for everything, in-process for owned subjects."""

    def __init__(self, remote: NatsBus) -> None:
        self.remote = remote
        self._local = InProcessBus(max_payload=remote.max_payload)

    @property
    def max_payload(self) -> int:
        """The NATS connection's payload limit (the in-process hand-off keeps it too)."""
        return self.remote.max_payload

    @property
    def is_connected(self) -> bool:
        """Whether the NATS connection is up."""
        return self.remote.is_connected

    async def request(
        self, subject: str, data: bytes, *, headers: dict[str, str] | None = None, timeout: float
    ) -> bytes:
        """In-process to an owned subject while NATS is up, over NATS otherwise."""
        if self._local.receivers(subject) and self.remote.is_connected:
            return await self._local.request(subject, data, headers=headers, timeout=timeout)
        return await self.remote.request(subject, data, headers=headers, timeout=timeout)

    async def publish(self, subject: str, data: bytes, *, headers: dict[str, str] | None = None) -> None:
        """In-process to an owned subject (connected or not), over NATS otherwise."""
        if self._local.receivers(subject):
            await self._local.publish(subject, data, headers=headers)
        else:
            await self.remote.publish(subject, data, headers=headers)

    async def subscribe(self, subject: str, cb: Callback, *, queue: str = "", owned: bool = False) -> Subscription:
        """A NATS subscription; an ``owned`` one also receives this process's messages in-process."""
        remote = await self.remote.subscribe(subject, cb, queue=queue)
        if not owned:
            return remote
        try:
            local = await self._local.subscribe(subject, cb, queue=OWNERS)
        except BaseException:
            await remote.unsubscribe()
            raise
        return OwnedSubscription(remote, local)

    async def close(self) -> None:
        """End the in-process subscriptions (the NATS connection is its owner's to close)."""
        await self._local.close()
