"""The (read, write) stream pair every upstream transport yields, typed by what the session does with it.

The SDK names this pair ``TransportStreams`` in a private module (``mcp.client._transport``). These
protocols describe the same streams by the methods used on them, so the pair any of the SDK's
clients yields is one, and ``ClientSession`` accepts it.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self

from mcp.shared.message import SessionMessage


class MessageReader(Protocol):
    """The read side: messages from the upstream, or the exception a transport met reading them."""

    async def receive(self) -> SessionMessage | Exception: ...

    async def aclose(self) -> None: ...


class MessageWriter(Protocol):
    """The write side: messages to the upstream."""

    async def send(self, item: SessionMessage, /) -> None: ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None: ...


TransportStreams = tuple[MessageReader, MessageWriter]
"""What ``connect()`` of an upstream transport yields."""
