"""The standalone back-channel of each MCP session this replica serves, by session id.

The session manager (``shared_sessions``) builds every session's ``Connection`` and registers it
here while the session runs; ``client_links`` reads a session's channel (the GET stream on
Streamable HTTP) from here. A request of no session here (a 2026-07-28 request, or one of a session
that just ended) has no standalone channel: ``NO_CHANNEL`` refuses requests and drops notifications.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from mcp.server.connection import Connection
from mcp.shared.dispatcher import CallOptions, Outbound
from mcp.shared.exceptions import NoBackChannelError

log = logging.getLogger("toolmesh.gateway.clients")


class NoChannel:
    """The channel of a request without a session: nothing can reach its client outside the request."""

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        """Refuse: there is no stream to send the request on."""
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        """Drop the notification."""
        log.debug("dropped %s: no standalone channel", method)


NO_CHANNEL = NoChannel()


class Served(Protocol):
    """The transport of a session served here, as far as other replicas' traffic for it needs."""

    @property
    def streaming(self) -> bool:
        """Whether the client's standalone stream (GET) is open here."""
        ...

    async def deliver(self, message: dict[str, Any]) -> bool:
        """Hand a client's message to the session as if the client had posted it here."""
        ...


class SessionChannels:
    """The connections of the sessions served here, registered by the session manager that made them."""

    def __init__(self) -> None:
        self._connections: dict[str, Connection] = {}
        self._transports: dict[str, Served] = {}

    def add(self, session_id: str, connection: Connection, transport: Served) -> None:
        """A session starts being served here."""
        self._connections[session_id] = connection
        self._transports[session_id] = transport

    def remove(self, session_id: str) -> None:
        """A session stopped being served here."""
        self._connections.pop(session_id, None)
        self._transports.pop(session_id, None)

    async def deliver(self, session_id: str, message: dict[str, Any]) -> bool:
        """Give a session served here a message its client sent to another replica (False: none here)."""
        transport = self._transports.get(session_id)
        return transport is not None and await transport.deliver(message)

    def streaming(self, session_id: str) -> bool:
        """Whether the session's standalone stream is open here."""
        transport = self._transports.get(session_id)
        return transport is not None and transport.streaming

    def connection(self, session_id: str) -> Connection | None:
        """The connection of a session served here."""
        return self._connections.get(session_id)

    def standalone(self, session_id: str | None) -> Outbound:
        """The session's standalone channel (``NO_CHANNEL`` without a session served here)."""
        connection = self._connections.get(session_id) if session_id is not None else None
        return connection.outbound if connection is not None else NO_CHANNEL
