"""A request for a server nobody holds a session for: ask for a connect, wait (bounded) until a
session answers a ping, and try once more; ``SESSION_NOT_FOUND`` when none came in time."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nats.js import JetStreamContext

from toolmesh.contracts.commands import ConnectServer
from toolmesh.contracts.rpc import PingRpc
from toolmesh.errors import SessionNotFound, ToolmeshError
from toolmesh.platform.bus.interface import Bus
from toolmesh.platform.bus.publishing import publish_command
from toolmesh.platform.bus.requests import NoOwner, ask_owner
from toolmesh.platform.polling import poll_until
from toolmesh_gateway.routing import ServerRoute

SESSION_WAIT_SECONDS = 3.0
"""How long a call with no session waits for one to appear after asking for a reconnect."""
T = TypeVar("T")


class SessionRecovery:
    """Gets a server's session back for a request that found no owner (tool calls, forwarded requests)."""

    def __init__(self, bus: Bus, js: JetStreamContext) -> None:
        self._bus = bus
        self._js = js

    async def with_session(self, server: ServerRoute, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``; when nobody holds the server's session, ask for one and try once more."""
        try:
            return await attempt()
        except NoOwner:
            await self.reconnect(server)
            try:
                return await attempt()
            except NoOwner as exc:
                raise self.no_session(server) from exc

    async def reconnect(self, server: ServerRoute) -> None:
        """Nobody holds the session: ask for a connect and wait (bounded) until a session answers a ping."""
        await publish_command(self._js, ConnectServer(server_id=server.id, reason="session_not_found"))
        deadline = time.monotonic() + SESSION_WAIT_SECONDS

        async def answered() -> bool:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await ask_owner(self._bus, server.id, "ping", PingRpc(timeout_seconds=left), timeout=left)
            return True

        if not await poll_until(answered, SESSION_WAIT_SECONDS, interval=0.1, retry_on=(ToolmeshError,)):
            raise self.no_session(server)

    @staticmethod
    def no_session(server: ServerRoute) -> SessionNotFound:
        """The error of a server nobody holds a session for (a reconnect was requested)."""
        return SessionNotFound(
            f"No active session for server {server.name}",
            {"server_id": server.id, "reconnect": "requested"},
            server=server.identity(),
        )
