"""``ToolmeshClient``: one typed method per API operation, over either transport."""

from __future__ import annotations

from functools import cache
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from toolmesh.client.transports import HttpTransport, Transport
from toolmesh.contracts import api
from toolmesh.contracts.aggregator import AggregatorState
from toolmesh.contracts.audit import AuditPage
from toolmesh.contracts.connected_apps import ConnectedAppList
from toolmesh.contracts.keys import CreatedKey, CreateKeyRequest, KeyList
from toolmesh.contracts.search import SearchRequest, SearchResponse
from toolmesh.contracts.servers import (
    ApproveToolsResponse,
    ConnectResponse,
    DisconnectResponse,
    HistoryEntry,
    RefreshResponse,
    RegisterServerRequest,
    ServerCreated,
    ServerDetail,
    ServerList,
    ToolList,
)
from toolmesh.contracts.tools import ToolCallRequest, ToolCallResponse

T = TypeVar("T")
DEFAULT_TIMEOUT = 30.0
CALL_GRACE_SECONDS = 5.0
"""How much longer than a tool call's own timeout the client waits for its reply."""


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


class ToolmeshClient:
    """The toolmesh API for other services; errors are raised as ``toolmesh.errors`` exceptions."""

    def __init__(self, transport: Transport, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.transport = transport
        self.timeout = timeout

    @classmethod
    async def over_nats(cls, url: str, token: str, **options: Any) -> ToolmeshClient:
        """A client with a NATS connection of its own (``options``: ``nats.connect`` credentials, TLS)."""
        from toolmesh.client.nats_transport import NatsTransport  # nats is loaded by NATS clients only

        return cls(await NatsTransport.connect(url, token, **options))

    @classmethod
    def over_http(cls, base_url: str, token: str, *, http: httpx.AsyncClient | None = None) -> ToolmeshClient:
        """A client of the REST API at ``base_url`` (e.g. ``http://127.0.0.1:8081``)."""
        return cls(HttpTransport(base_url, token, http=http))

    async def close(self) -> None:
        """Close the transport's connection."""
        await self.transport.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def request(
        self, name: str, request: BaseModel, *, idempotency_key: str | None = None, timeout: float | None = None
    ) -> Any:
        """Run the operation ``name`` (e.g. ``servers.register``) and return its typed result."""
        operation = api.OPERATIONS_BY_NAME[name]
        if not isinstance(request, operation.request):
            raise TypeError(f"{name} takes a {operation.request.__name__}, not a {type(request).__name__}")
        result = await self.transport.send(operation, request, idempotency_key, timeout or self.timeout)
        return None if operation.result is None else _adapter(operation.result).validate_python(result)

    # Servers

    async def register(self, request: RegisterServerRequest, *, idempotency_key: str | None = None) -> ServerCreated:
        """Register a server (and connect it when ``auto_connect``)."""
        result: ServerCreated = await self.request("servers.register", request, idempotency_key=idempotency_key)
        return result

    async def list_servers(self, request: api.ListServersRequest | None = None) -> ServerList:
        """A page of servers."""
        result: ServerList = await self.request("servers.list", request or api.ListServersRequest())
        return result

    async def server(self, server_id: str) -> ServerDetail:
        """One server."""
        result: ServerDetail = await self.request("servers.get", api.ServerRef(server_id=server_id))
        return result

    async def connect(self, server_id: str, *, idempotency_key: str | None = None) -> ConnectResponse:
        """Connect a server (idempotent in itself)."""
        ref = api.ServerRef(server_id=server_id)
        result: ConnectResponse = await self.request("servers.connect", ref, idempotency_key=idempotency_key)
        return result

    async def disconnect(
        self, server_id: str, *, force: bool = False, idempotency_key: str | None = None
    ) -> DisconnectResponse:
        """Disconnect a server, draining (or with ``force`` cancelling) its pending calls."""
        body = api.DisconnectServerRequest(server_id=server_id, force=force)
        result: DisconnectResponse = await self.request("servers.disconnect", body, idempotency_key=idempotency_key)
        return result

    async def remove(self, server_id: str, *, idempotency_key: str | None = None) -> None:
        """Remove a server with its tools and history."""
        await self.request("servers.remove", api.ServerRef(server_id=server_id), idempotency_key=idempotency_key)

    async def tools(self, server_id: str, *, include_schemas: bool = False) -> ToolList:
        """The tools of one server."""
        body = api.ServerToolsRequest(server_id=server_id, include_schemas=include_schemas)
        result: ToolList = await self.request("servers.tools", body)
        return result

    async def history(self, server_id: str) -> list[HistoryEntry]:
        """The connection history of one server."""
        result: list[HistoryEntry] = await self.request("servers.history", api.ServerRef(server_id=server_id))
        return result

    async def refresh(self, server_id: str, *, idempotency_key: str | None = None) -> RefreshResponse:
        """Run tool discovery again (the new list arrives as a ``tools.discovered`` event)."""
        ref = api.ServerRef(server_id=server_id)
        result: RefreshResponse = await self.request("servers.refresh", ref, idempotency_key=idempotency_key)
        return result

    async def approve(
        self, server_id: str, tools: list[str] | None = None, *, idempotency_key: str | None = None
    ) -> ApproveToolsResponse:
        """Approve held tool definitions (every held tool when ``tools`` is None)."""
        body = api.ApproveServerToolsRequest(server_id=server_id, tools=tools)
        result: ApproveToolsResponse = await self.request("servers.approve", body, idempotency_key=idempotency_key)
        return result

    # Tools, search, state

    async def call_tool(self, request: ToolCallRequest, *, idempotency_key: str | None = None) -> ToolCallResponse:
        """Call a tool; waits its timeout (or the default request timeout) plus a grace period."""
        timeout = (request.timeout_seconds or 60.0) + CALL_GRACE_SECONDS
        result: ToolCallResponse = await self.request(
            "tools.call", request, idempotency_key=idempotency_key, timeout=max(timeout, self.timeout)
        )
        return result

    async def search(self, request: SearchRequest) -> SearchResponse:
        """Hybrid search over the caller's tools."""
        result: SearchResponse = await self.request("search.query", request)
        return result

    async def state(self) -> AggregatorState:
        """Counts of servers by status and of tools."""
        result: AggregatorState = await self.request("aggregator.state", api.NoArguments())
        return result

    async def audit(self, request: api.AuditRequest | None = None) -> AuditPage:
        """A page of the audit log (admins and the owner)."""
        result: AuditPage = await self.request("audit.list", request or api.AuditRequest())
        return result

    # Keys

    async def create_key(self, request: CreateKeyRequest, *, idempotency_key: str | None = None) -> CreatedKey:
        """Create an API key (its token is in this result only)."""
        result: CreatedKey = await self.request("keys.create", request, idempotency_key=idempotency_key)
        return result

    async def keys(self) -> KeyList:
        """The keys the caller manages."""
        result: KeyList = await self.request("keys.list", api.NoArguments())
        return result

    async def revoke_key(self, key_id: str, *, idempotency_key: str | None = None) -> None:
        """Revoke an API key."""
        await self.request("keys.revoke", api.KeyRef(key_id=key_id), idempotency_key=idempotency_key)

    async def apps(self) -> ConnectedAppList:
        """Connected apps (MCP clients signed in with OAuth): the caller's own; an admin's namespace's;
        the owner's every one."""
        result: ConnectedAppList = await self.request("apps.list", api.NoArguments())
        return result

    async def disconnect_app(self, app_id: str, *, idempotency_key: str | None = None) -> None:
        """Revoke a connected app: its tokens are refused at once by every gateway."""
        await self.request("apps.disconnect", api.AppRef(app_id=app_id), idempotency_key=idempotency_key)
