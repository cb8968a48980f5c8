"""What the gateway does for each server command: validate, publish, wait for the projection.

HTTP routes (and, later, the public NATS API) call these methods; nothing here speaks HTTP.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from nats.js.kv import KeyValue

from toolmesh.bus.names import release_name, reserve_name
from toolmesh.bus.publishing import publish_command, publish_event
from toolmesh.contracts.commands import ConnectServer
from toolmesh.contracts.events import Event, ServerRegistered, ServerRemoved, ServerStatusChanged
from toolmesh.contracts.rpc import DisconnectRpc, DisconnectRpcResult, RefreshRpc
from toolmesh.contracts.servers import (
    ConnectResponse,
    DisconnectResponse,
    RefreshResponse,
    RegisterServerRequest,
    ServerCreated,
)
from toolmesh.credentials import CredentialBox, mask_config
from toolmesh.errors import LimitExceeded, ServerAlreadyExists, ServerNotFound, ServerUnavailable
from toolmesh.lifecycle import ServerStatus, check_transition
from toolmesh.runtime import Backends
from toolmesh.store import queries
from toolmesh_gateway.consistency import wait_for_projection
from toolmesh_gateway.owners import NoOwner, ask_owner

log = logging.getLogger("toolmesh.gateway")


@dataclass
class Caller:
    """Who asked: recorded in events and the audit log."""

    actor: str | None = None
    ip_address: str | None = None


class ServerCommands:
    """Registration, connection, disconnection, removal and refresh of servers."""

    def __init__(self, backends: Backends, names: KeyValue, box: CredentialBox) -> None:
        self._b = backends
        self._names = names
        self._box = box

    async def _publish_and_wait(self, *events: Event) -> None:
        seq = 0
        for event in events:
            seq = await publish_event(self._b.js, event)
        await wait_for_projection(self._b.db, seq, self._b.settings.projection_wait_seconds)

    async def _exists(self, server_id: str) -> bool:
        return await queries.get_server(self._b.db, server_id) is not None

    async def _server(self, server_id: str) -> queries.Row:
        row = await queries.get_server(self._b.db, server_id)
        if row is None:
            raise ServerNotFound(f"Server not found: {server_id}", {"server_id": server_id})
        return row

    async def register(self, request: RegisterServerRequest, caller: Caller) -> ServerCreated:
        """BR-001: register, then connect when ``auto_connect``; 409 when the name is taken."""
        _, total = await queries.list_servers(self._b.db, status=None, limit=1, offset=0)
        if total >= self._b.settings.max_servers:
            raise LimitExceeded(
                f"Server limit reached ({self._b.settings.max_servers})",
                {"max_servers": self._b.settings.max_servers},
            )
        server_id = str(uuid.uuid4())
        if await queries.get_server_by_name(self._b.db, request.name) is not None or not await reserve_name(
            self._names, request.name, server_id, self._exists
        ):
            raise ServerAlreadyExists(f"Server already exists: {request.name}", {"name": request.name})
        health_url = str(request.health_check_url) if request.health_check_url else None
        registered = ServerRegistered(
            server_id=server_id,
            actor=caller.actor,
            ip_address=caller.ip_address,
            name=request.name,
            description=request.description,
            transport_type=request.transport_type,
            sealed_config=self._box.seal(request.connection_config),
            masked_config=mask_config(request.connection_config),
            health_check_url=health_url,
        )
        try:
            events: list[Event] = [registered]
            status = ServerStatus.DISCONNECTED
            if request.auto_connect:
                events.append(self._connecting(server_id, ServerStatus.DISCONNECTED, caller, "auto_connect"))
                status = ServerStatus.CONNECTING
            await self._publish_and_wait(*events)
        except BaseException:
            await release_name(self._names, request.name)
            raise
        if request.auto_connect:
            await publish_command(self._b.js, ConnectServer(server_id=server_id, reason="auto_connect"))
        return ServerCreated(
            id=server_id,
            name=request.name,
            description=request.description,
            transport_type=request.transport_type,
            status=status,
            health_check_url=health_url,
            tool_count=0,
            registered_at=registered.occurred_at,
            connected_at=None,
        )

    @staticmethod
    def _connecting(server_id: str, current: ServerStatus, caller: Caller, reason: str) -> ServerStatusChanged:
        check_transition(current, ServerStatus.CONNECTING)
        return ServerStatusChanged(
            server_id=server_id,
            actor=caller.actor,
            status=ServerStatus.CONNECTING,
            previous_status=current,
            history="CONNECT_REQUESTED",
            details={"reason": reason},
        )

    async def connect(self, server_id: str, caller: Caller) -> ConnectResponse:
        """BR-002: start connecting; idempotent when already connected or connecting."""
        row = await self._server(server_id)
        current = ServerStatus(row["status"])
        if current in (ServerStatus.CONNECTED, ServerStatus.DEGRADED):
            return ConnectResponse(server_id=server_id, status=current, message="Server already connected")
        if current is ServerStatus.CONNECTING:
            return ConnectResponse(server_id=server_id, status=current, message="Connection already in progress")
        await self._publish_and_wait(self._connecting(server_id, current, caller, "connect"))
        await publish_command(self._b.js, ConnectServer(server_id=server_id, reason="connect"))
        return ConnectResponse(server_id=server_id, status=ServerStatus.CONNECTING, message="Connection initiated")

    async def disconnect(self, server_id: str, force: bool, caller: Caller) -> DisconnectResponse:
        """BR-007: close the session (draining or cancelling calls); tools are kept."""
        row = await self._server(server_id)
        current = ServerStatus(row["status"])
        if current is ServerStatus.DISCONNECTED:
            return DisconnectResponse(
                server_id=server_id, status=current, pending_requests=0, message="Server already disconnected"
            )
        try:
            result = DisconnectRpcResult.model_validate(
                await ask_owner(
                    self._b.nc,
                    server_id,
                    "disconnect",
                    DisconnectRpc(force=force, actor=caller.actor),
                    timeout=10,
                )
            )
        except NoOwner:
            check_transition(current, ServerStatus.DISCONNECTED)
            await self._publish_and_wait(
                ServerStatusChanged(
                    server_id=server_id,
                    actor=caller.actor,
                    status=ServerStatus.DISCONNECTED,
                    previous_status=current,
                    history="DISCONNECTED",
                    details={"force": force},
                )
            )
            result = DisconnectRpcResult(status=ServerStatus.DISCONNECTED, pending_requests=0)
        if result.seq:
            await wait_for_projection(self._b.db, result.seq, self._b.settings.projection_wait_seconds)
        if result.status == "DISCONNECTING":
            message = f"Waiting for {result.pending_requests} pending requests to complete"
        else:
            message = "Server disconnected successfully"
        return DisconnectResponse(
            server_id=server_id,
            status=result.status,
            pending_requests=result.pending_requests,
            message=message,
        )

    async def remove(self, server_id: str, caller: Caller) -> None:
        """BR-008: disconnect if needed, then remove the server with its tools and history."""
        row = await self._server(server_id)
        try:
            await ask_owner(
                self._b.nc, server_id, "disconnect", DisconnectRpc(force=True, actor=caller.actor), timeout=10
            )
        except NoOwner:
            log.debug("no session to close before removing %s", row["name"], extra={"server": row["name"]})
        await self._publish_and_wait(ServerRemoved(server_id=server_id, actor=caller.actor, name=row["name"]))
        await release_name(self._names, row["name"])

    async def refresh(self, server_id: str, caller: Caller) -> RefreshResponse:
        """Ask the owner to run discovery again (202); only a connected server discovers."""
        row = await self._server(server_id)
        if row["status"] != ServerStatus.CONNECTED:
            raise ServerUnavailable(
                f"Server unavailable: {row['name']}",
                server={"id": server_id, "name": row["name"], "status": row["status"]},
            )
        try:
            await ask_owner(self._b.nc, server_id, "refresh", RefreshRpc(actor=caller.actor), timeout=10)
        except NoOwner:
            await publish_command(self._b.js, ConnectServer(server_id=server_id, reason="refresh"))
            raise
        return RefreshResponse(server_id=server_id)
