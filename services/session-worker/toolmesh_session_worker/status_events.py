"""The domain events a status change of an owned server means: ``server.connected`` and ``server.disconnected``."""

from __future__ import annotations

from typing import Protocol

from toolmesh.contracts.connection_config import TransportType
from toolmesh.contracts.events import Event, ServerConnected, ServerDisconnected
from toolmesh.lifecycle import SERVING, ServerStatus


class ServerIdentity(Protocol):
    """What the events name of the server."""

    server_id: str
    name: str
    namespace: str
    agent: str | None
    tool_count: int


def status_event(
    server: ServerIdentity,
    transport: str,
    previous: ServerStatus,
    status: ServerStatus,
    history: str,
    error: str | None,
) -> Event | None:
    """``server.connected`` on entering CONNECTED without a session before; ``server.disconnected``
    on leaving the serving states (graceful when asked for: DISCONNECTED; not after an error)."""
    if status is ServerStatus.CONNECTED and previous not in SERVING:
        return ServerConnected(
            server_id=server.server_id,
            namespace=server.namespace,
            server_name=server.name,
            transport_type=TransportType(transport),
            agent=server.agent,
            tool_count=server.tool_count,
            reconnect=history != "CONNECTED",
        )
    if previous in SERVING and status in (ServerStatus.DISCONNECTED, ServerStatus.ERROR):
        graceful = status is ServerStatus.DISCONNECTED
        return ServerDisconnected(
            server_id=server.server_id,
            namespace=server.namespace,
            server_name=server.name,
            was_graceful=graceful,
            reason=None if graceful else error,
        )
    return None
