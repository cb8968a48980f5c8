"""What the gateway does for each server command: check the caller, publish, wait for the projection.

Every method takes the ``Caller``: its role decides whether it may act (403 ``FORBIDDEN``) and its
namespace what it can see — a server of another namespace is not found (404), exactly as if it
did not exist. An ``agent`` registers servers and connects, disconnects, refreshes and removes the
ones it registered; to it, a server another principal registered is not found either. HTTP routes
(and, later, the public NATS API) call these methods; nothing here speaks HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from nats.js.kv import KeyValue

from toolmesh.contracts.commands import ClassifyTools, ConnectServer
from toolmesh.contracts.events import (
    DiscoveredTool,
    Event,
    InstructionsApproved,
    PromptsApproved,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    TemplatesApproved,
    ToolsApproved,
)
from toolmesh.contracts.keys import Role
from toolmesh.contracts.resources import ApprovePromptsResponse
from toolmesh.contracts.rpc import DisconnectRpc, DisconnectRpcResult, RefreshRpc
from toolmesh.contracts.servers import (
    ApproveInstructionsResponse,
    ApproveToolsResponse,
    ClassifyResponse,
    ConnectResponse,
    DisconnectResponse,
    NewToolsPolicy,
    RefreshResponse,
    RegisterServerRequest,
    ServerCreated,
)
from toolmesh.credentials import CredentialBox, mask_config
from toolmesh.errors import (
    LimitExceeded,
    PromptNotFound,
    ResourceNotFound,
    ServerAlreadyExists,
    ServerNotFound,
    ServerUnavailable,
    ToolNotFound,
)
from toolmesh.lifecycle import ServerStatus, check_transition
from toolmesh.pinning import held_approvals, instructions_hash, new_tools_policy
from toolmesh.platform.bus.publishing import publish_command, publish_event
from toolmesh.platform.bus.requests import NoOwner, ask_owner
from toolmesh.platform.metrics import record_limit_rejection
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store import queries
from toolmesh.platform.store.consistency import wait_for_projection
from toolmesh.platform.store.locks import advisory_lock
from toolmesh.registration_policy import check_registration
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.egress_admission import admit_upstream
from toolmesh_gateway.endpoint_reads import endpoint_named
from toolmesh_gateway.name_reservations import name_holder_exists, name_key, release_name, reserve_name

log = logging.getLogger("toolmesh.gateway")


@dataclass(frozen=True)
class Held:
    """A kind of held definitions an admin approves: tools, prompts or resource templates."""

    noun: str  # "tools": the action, the error's context key and the event's field
    listed: Callable[[asyncpg.Pool, str], Awaitable[Sequence[Any]]]  # rows by original_name, with pins
    not_found: type[ToolNotFound] | type[PromptNotFound] | type[ResourceNotFound]
    event: type[ToolsApproved] | type[PromptsApproved] | type[TemplatesApproved]


_TOOLS = Held("tools", lambda db, server_id: queries.list_tools(db, [server_id]), ToolNotFound, ToolsApproved)
_PROMPTS = Held("prompts", queries.list_prompts, PromptNotFound, PromptsApproved)


class ServerCommands:
    """Registration, connection, disconnection, removal, refresh and tool approval of servers."""

    def __init__(self, backends: Backends, names: KeyValue, box: CredentialBox) -> None:
        self._b = backends
        self._names = names
        self._box = box
        # One registration of this process waits for the database lock at a time, so waiters never
        # hold every pooled connection while the lock's holder needs one.
        self._registering = asyncio.Lock()

    async def _publish_and_wait(self, *events: Event) -> None:
        seq = 0
        for event in events:
            seq = await publish_event(self._b.js, event)
        await wait_for_projection(self._b.db, seq, self._b.settings.projection_wait_seconds)

    async def _exists(self, holder_id: str) -> bool:
        return await name_holder_exists(self._b.db, holder_id)

    async def server(self, server_id: str, caller: Caller) -> queries.Row:
        """The server as the caller sees it; ``ServerNotFound`` when unknown or in another namespace."""
        row = await queries.get_server(self._b.db, server_id, caller.principal.scope)
        if row is None:
            raise ServerNotFound(f"Server not found: {server_id}", {"server_id": server_id})
        return row

    async def _managed(self, server_id: str, caller: Caller, action: str, *, agents: bool = True) -> queries.Row:
        """The server ``caller`` may ``action``: 404 when it cannot see it (another namespace, or for an
        agent another principal's server), 403 when its role may not (``agents``: agents may, on theirs)."""
        row = await self.server(server_id, caller)  # not found first: no hint that it exists
        principal = caller.principal
        if not principal.owns(row["created_by"]):
            raise ServerNotFound(f"Server not found: {server_id}", {"server_id": server_id})
        if not (agents and principal.role is Role.AGENT):
            principal.require_manager(action)
        return row

    async def register(self, request: RegisterServerRequest, caller: Caller) -> ServerCreated:
        """BR-001: register, then connect when ``auto_connect``; 409 when the namespace has the name.

        STDIO servers are for owners and admins, and a config names only the commands and variables the
        deployment allows (``registration_policy``); its URLs follow the egress policy (``egress_admission``:
        plain http and loopback or private targets for owners and admins, metadata never). Registrations
        take turns across every gateway replica (a database lock held until the new server is in the
        read model), so concurrent ones can never exceed the server limit.
        """
        caller.principal.require_registrar()
        namespace = caller.principal.home(request.namespace)
        check_registration(request, caller.principal.role, namespace, self._b.settings)
        await admit_upstream(request, caller.principal.manages, self._b.settings.upstream_private_networks)
        policy = new_tools_policy(request.new_tools, caller.principal.role)  # auto is an admin's choice
        async with self._registering, advisory_lock(self._b.db, "server-registration"):
            await self._within_server_limits(namespace)
            created = await self._register(request, namespace, caller, policy)
        if request.auto_connect:
            await publish_command(self._b.js, ConnectServer(server_id=created.id, reason="auto_connect"))
        return created

    async def _within_server_limits(self, namespace: str) -> None:
        """``LimitExceeded`` when the deployment, or ``namespace`` (its fair share), has all the servers
        it may have (checked under the registration lock)."""
        settings = self._b.settings
        if await queries.count_servers(self._b.db) >= settings.max_servers:
            record_limit_rejection("servers")
            raise LimitExceeded(f"Server limit reached ({settings.max_servers})", {"max_servers": settings.max_servers})
        own = settings.namespace_quota(namespace).max_servers
        if await queries.count_servers_in(self._b.db, namespace) >= own:
            record_limit_rejection("namespace_servers")
            raise LimitExceeded(
                f"Server limit of namespace '{namespace}' reached ({own})",
                {"namespace": namespace, "namespace_max_servers": own},
            )

    async def _register(
        self, request: RegisterServerRequest, namespace: str, caller: Caller, policy: NewToolsPolicy
    ) -> ServerCreated:
        server_id = str(uuid.uuid4())
        key = name_key(namespace, request.name)
        taken = (
            await queries.get_server_by_name(self._b.db, request.name, namespace) is not None
            or await endpoint_named(self._b.db, namespace, request.name) is not None
        )
        if taken or not await reserve_name(self._names, key, server_id, self._exists):
            raise ServerAlreadyExists(
                f"Server already exists: {request.name}",
                {"name": request.name, "namespace": namespace},
            )
        health_url = str(request.health_check_url) if request.health_check_url else None
        registered = ServerRegistered(
            server_id=server_id,
            namespace=namespace,
            actor=caller.actor,
            ip_address=caller.ip_address,
            name=request.name,
            description=request.description,
            transport_type=request.transport_type,
            sealed_config=self._box.seal(request.connection_config),
            masked_config=mask_config(request.connection_config),
            health_check_url=health_url,
            new_tools=policy,
            private_network=caller.principal.manages,  # loopback and private targets: an admin's decision
        )
        try:
            events: list[Event] = [registered]
            status = ServerStatus.DISCONNECTED
            if request.auto_connect:
                events.append(
                    self._connecting(server_id, namespace, ServerStatus.DISCONNECTED, caller.actor, "auto_connect")
                )
                status = ServerStatus.CONNECTING
            await self._publish_and_wait(*events)
        except BaseException:
            await release_name(self._names, key)
            raise
        return ServerCreated(
            id=server_id,
            name=request.name,
            namespace=namespace,
            description=request.description,
            transport_type=request.transport_type,
            status=status,
            health_check_url=health_url,
            tool_count=0,
            registered_at=registered.occurred_at,
            connected_at=None,
        )

    @staticmethod
    def _connecting(
        server_id: str, namespace: str, current: ServerStatus, actor: str, reason: str
    ) -> ServerStatusChanged:
        check_transition(current, ServerStatus.CONNECTING)
        return ServerStatusChanged(
            server_id=server_id,
            namespace=namespace,
            actor=actor,
            status=ServerStatus.CONNECTING,
            previous_status=current,
            history="CONNECT_REQUESTED",
            details={"reason": reason},
        )

    async def connect(self, server_id: str, caller: Caller) -> ConnectResponse:
        """BR-002: start connecting; idempotent when already connected or connecting."""
        row = await self._managed(server_id, caller, "connect servers")
        current = ServerStatus(row["status"])
        if current in (ServerStatus.CONNECTED, ServerStatus.DEGRADED):
            return ConnectResponse(server_id=server_id, status=current, message="Server already connected")
        if current is ServerStatus.CONNECTING:
            return ConnectResponse(server_id=server_id, status=current, message="Connection already in progress")
        await self._publish_and_wait(self._connecting(server_id, row["namespace"], current, caller.actor, "connect"))
        await publish_command(self._b.js, ConnectServer(server_id=server_id, reason="connect"))
        return ConnectResponse(server_id=server_id, status=ServerStatus.CONNECTING, message="Connection initiated")

    async def connect_authorized(self, server_id: str, actor: str) -> None:
        """Connect a server that stopped for want of an authorization (ERROR, nobody retrying) now that
        ``actor`` authorized it; any other server is left as it is."""
        row = await queries.get_server(self._b.db, server_id)
        if row is None or ServerStatus(row["status"]) is not ServerStatus.ERROR:
            return
        await self._publish_and_wait(
            self._connecting(server_id, row["namespace"], ServerStatus.ERROR, actor, "authorized")
        )
        await publish_command(self._b.js, ConnectServer(server_id=server_id, reason="authorized"))

    async def disconnect(self, server_id: str, force: bool, caller: Caller) -> DisconnectResponse:
        """BR-007: close the session (draining or cancelling calls); tools are kept."""
        row = await self._managed(server_id, caller, "disconnect servers")
        current = ServerStatus(row["status"])
        if current is ServerStatus.DISCONNECTED:
            return DisconnectResponse(
                server_id=server_id, status=current, pending_requests=0, message="Server already disconnected"
            )
        try:
            result = DisconnectRpcResult.model_validate(
                await ask_owner(
                    self._b.bus,
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
                    namespace=row["namespace"],
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
        row = await self._managed(server_id, caller, "remove servers")
        try:
            await ask_owner(
                self._b.bus, server_id, "disconnect", DisconnectRpc(force=True, actor=caller.actor), timeout=10
            )
        except NoOwner:
            log.debug("no session to close before removing %s", row["name"], extra={"server": row["name"]})
        await self._publish_and_wait(
            ServerRemoved(server_id=server_id, namespace=row["namespace"], actor=caller.actor, name=row["name"])
        )
        await release_name(self._names, name_key(row["namespace"], row["name"]))

    async def refresh(self, server_id: str, caller: Caller) -> RefreshResponse:
        """Ask the owner to run discovery again (202); only a connected server discovers."""
        row = await self._managed(server_id, caller, "refresh servers")
        if row["status"] != ServerStatus.CONNECTED:
            raise ServerUnavailable(
                f"Server unavailable: {row['name']}",
                server={"id": server_id, "name": row["name"], "status": row["status"]},
            )
        try:
            await ask_owner(self._b.bus, server_id, "refresh", RefreshRpc(actor=caller.actor), timeout=10)
        except NoOwner:
            await publish_command(self._b.js, ConnectServer(server_id=server_id, reason="refresh"))
            raise
        return RefreshResponse(server_id=server_id)

    async def classify(self, server_id: str, caller: Caller) -> ClassifyResponse:
        """Queue the server's unclassified tools for classification again (202; results arrive as events)."""
        row = await self._managed(server_id, caller, "classify tools")
        waiting = [t for t in await queries.list_tools(self._b.db, [server_id]) if not t["is_classified"]]
        if waiting:
            command = ClassifyTools(
                server_id=server_id,
                server_name=row["name"],
                namespace=row["namespace"],
                tools=[
                    DiscoveredTool(
                        original_name=t["original_name"],
                        description=t["description"],
                        input_schema=t["input_schema"],
                        category=t["category"],
                    )
                    for t in waiting
                ],
            )
            await publish_command(self._b.js, command)
        return ClassifyResponse(server_id=server_id, tools=[t["original_name"] for t in waiting])

    async def approve(self, server_id: str, names: list[str] | None, caller: Caller) -> ApproveToolsResponse:
        """Approve the current definitions of held tools (all held tools when ``names`` is None)."""
        approved = await self.approve_held(_TOOLS, server_id, names, caller)
        return ApproveToolsResponse(server_id=server_id, approved=approved)

    async def approve_prompts(self, server_id: str, names: list[str] | None, caller: Caller) -> ApprovePromptsResponse:
        """Approve the current definitions of held prompts (all held prompts when ``names`` is None)."""
        approved = await self.approve_held(_PROMPTS, server_id, names, caller)
        return ApprovePromptsResponse(server_id=server_id, approved=approved)

    async def approve_held(self, held: Held, server_id: str, names: list[str] | None, caller: Caller) -> list[str]:
        """Approve the current definitions of the held ones among ``names`` (every held one when None) of
        the server's tools, prompts or templates (``held``); the names approved. An unknown one is a 404."""
        row = await self._managed(server_id, caller, f"approve {held.noun}", agents=False)
        listed = {r["original_name"]: r for r in await held.listed(self._b.db, server_id)}
        unknown = sorted(set(names or []) - listed.keys())
        if unknown:
            raise held.not_found(
                f"{held.noun[:-1].capitalize()} not found on {row['name']}: {', '.join(unknown)}",
                {held.noun: unknown, "available": sorted(listed)},
            )
        approved = held_approvals(listed, names)
        if approved:
            fields = {"server_id": server_id, "namespace": row["namespace"], "server_name": row["name"]}
            event = held.event.model_validate({**fields, "actor": caller.actor, held.noun: approved})
            await self._publish_and_wait(event)
        return [a.original_name for a in approved]

    async def approve_instructions(self, server_id: str, caller: Caller) -> ApproveInstructionsResponse:
        """Approve the server's current instructions when a change holds them back."""
        row = await self._managed(server_id, caller, "approve instructions", agents=False)
        pinned = await queries.server_instructions(self._b.db, server_id)
        current = instructions_hash(pinned["instructions"] if pinned is not None else None)
        if pinned is None or pinned["instructions_hash"] in (None, current):
            return ApproveInstructionsResponse(server_id=server_id, approved=False)
        await self._publish_and_wait(
            InstructionsApproved(
                server_id=server_id,
                namespace=row["namespace"],
                actor=caller.actor,
                server_name=row["name"],
                definition_hash=current,
            )
        )
        return ApproveInstructionsResponse(server_id=server_id, approved=True)
