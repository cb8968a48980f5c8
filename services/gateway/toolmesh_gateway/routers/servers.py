"""``/api/v1/aggregator/servers``: registration, reads, connect, disconnect, removal, tools."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request, Response, status

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.servers import (
    ConnectResponse,
    DisconnectRequest,
    DisconnectResponse,
    HistoryEntry,
    RefreshResponse,
    RegisterServerRequest,
    ServerCreated,
    ServerDetail,
    ServerList,
    ToolList,
)
from toolmesh.errors import ServerNotFound
from toolmesh.lifecycle import ServerStatus
from toolmesh.runtime import Backends
from toolmesh.store import queries
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import backends, caller_of, server_commands
from toolmesh_gateway.server_commands import ServerCommands
from toolmesh_gateway.views import history_entry, server_detail, server_summary, tool_info

router = APIRouter(prefix="/api/v1/aggregator/servers", tags=["servers"])
Auth = Annotated[Principal, Depends(require_principal)]
Commands = Annotated[ServerCommands, Depends(server_commands)]
Conns = Annotated[Backends, Depends(backends)]
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody}}


async def _existing(b: Backends, server_id: str) -> queries.Row:
    row = await queries.get_server(b.db, server_id)
    if row is None:
        raise ServerNotFound(f"Server not found: {server_id}", {"server_id": server_id})
    return row


@router.post("", status_code=status.HTTP_201_CREATED, responses={409: {"model": ErrorBody}})
async def register_server(
    body: RegisterServerRequest, request: Request, principal: Auth, commands: Commands
) -> ServerCreated:
    """Register an external MCP server (BR-001); connects it when ``auto_connect``."""
    return await commands.register(body, caller_of(request, principal))


@router.get("")
async def list_servers(
    _: Auth,
    b: Conns,
    status_filter: Annotated[ServerStatus | None, Query(alias="status")] = None,
    include_tools: bool = False,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ServerList:
    """A page of registered servers, optionally by status and with their tools."""
    rows, total = await queries.list_servers(b.db, status=status_filter, limit=limit, offset=offset)
    tools_by_server: dict[str, list] = {r["id"]: [] for r in rows}
    if include_tools and rows:
        for tool in await queries.list_tools(b.db, list(tools_by_server)):
            tools_by_server[tool["server_id"]].append(tool_info(tool))
    return ServerList(
        servers=[server_summary(r, tools_by_server[r["id"]] if include_tools else None) for r in rows],
        total=total,
        limit=limit,
        offset=offset,
    )


@router.get("/{server_id}", responses=NOT_FOUND)
async def get_server(server_id: str, _: Auth, b: Conns) -> ServerDetail:
    """One server with its masked connection config."""
    return server_detail(await _existing(b, server_id))


@router.post("/{server_id}/connect", responses=NOT_FOUND)
async def connect_server(server_id: str, request: Request, principal: Auth, commands: Commands) -> ConnectResponse:
    """Connect (idempotent, BR-002)."""
    return await commands.connect(server_id, caller_of(request, principal))


@router.post("/{server_id}/disconnect", responses=NOT_FOUND)
async def disconnect_server(
    server_id: str,
    request: Request,
    principal: Auth,
    commands: Commands,
    body: Annotated[DisconnectRequest | None, Body()] = None,
) -> DisconnectResponse:
    """Disconnect (BR-007): drain pending calls up to 30 s, or cancel them with ``force``."""
    force = body.force if body else False
    return await commands.disconnect(server_id, force, caller_of(request, principal))


@router.delete("/{server_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def remove_server(server_id: str, request: Request, principal: Auth, commands: Commands) -> Response:
    """Remove a server with its tools, index entries and history (BR-008)."""
    await commands.remove(server_id, caller_of(request, principal))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{server_id}/tools", responses=NOT_FOUND)
async def list_server_tools(server_id: str, _: Auth, b: Conns, include_schemas: bool = False) -> ToolList:
    """The tools discovered on one server, with classified counts."""
    await _existing(b, server_id)
    tools = [tool_info(t, with_schema=include_schemas) for t in await queries.list_tools(b.db, [server_id])]
    classified = sum(1 for t in tools if t.is_classified)
    return ToolList(tools=tools, total=len(tools), classified=classified, unclassified=len(tools) - classified)


@router.post("/{server_id}/tools/refresh", status_code=status.HTTP_202_ACCEPTED, responses=NOT_FOUND)
async def refresh_server_tools(
    server_id: str, request: Request, principal: Auth, commands: Commands
) -> RefreshResponse:
    """Run tool discovery again (answers at once; the new list arrives as an event)."""
    return await commands.refresh(server_id, caller_of(request, principal))


@router.get("/{server_id}/history", responses=NOT_FOUND)
async def server_history(server_id: str, _: Auth, b: Conns) -> list[HistoryEntry]:
    """The connection history of one server, oldest first."""
    await _existing(b, server_id)
    return [history_entry(r) for r in await queries.connection_history(b.db, server_id)]
