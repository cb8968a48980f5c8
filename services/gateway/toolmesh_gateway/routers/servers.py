"""``/api/v1/aggregator/servers``: registration, reads, connect, disconnect, removal, tools."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request, Response, status

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.api_requests import ListServersRequest
from toolmesh.contracts.registry_import import RegistryImportPlan, RegistryImportRequest, RegistryPlanRequest
from toolmesh.contracts.servers import (
    ApproveInstructionsResponse,
    ApproveToolsRequest,
    ApproveToolsResponse,
    ClassifyResponse,
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
from toolmesh.lifecycle import ServerStatus
from toolmesh.naming import NAMESPACE_PATTERN
from toolmesh.platform.runtime import Backends
from toolmesh_gateway import reads, registry_imports
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import Limit, Offset, backends, caller_of, server_commands
from toolmesh_gateway.routers.audit import NO_NUL
from toolmesh_gateway.server_commands import ServerCommands
from toolmesh_gateway.views import server_detail

router = APIRouter(prefix="/api/v1/aggregator/servers", tags=["servers"])
Auth = Annotated[Principal, Depends(require_principal)]
Commands = Annotated[ServerCommands, Depends(server_commands)]
Conns = Annotated[Backends, Depends(backends)]
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody}}
MANAGED: dict[int | str, dict[str, Any]] = {403: {"model": ErrorBody}, 404: {"model": ErrorBody}}


@router.post("", status_code=status.HTTP_201_CREATED, responses={403: {"model": ErrorBody}, 409: {"model": ErrorBody}})
async def register_server(
    body: RegisterServerRequest, request: Request, principal: Auth, commands: Commands
) -> ServerCreated:
    """Register an external MCP server (BR-001); connects it when ``auto_connect``."""
    return await commands.register(body, caller_of(request, principal))


@router.post(
    "/import-registry",
    status_code=status.HTTP_201_CREATED,
    responses={403: {"model": ErrorBody}, 409: {"model": ErrorBody}},
)
async def import_registry_server(
    body: RegistryImportRequest, request: Request, principal: Auth, commands: Commands
) -> ServerCreated:
    """Register an MCP Registry ``server.json`` entry with values for its inputs (refused with
    VALIDATION_ERROR naming the missing inputs in ``context.missing_inputs``)."""
    return await registry_imports.import_registry(body, caller_of(request, principal), commands)


@router.post("/import-registry/plan")
async def plan_registry_import(body: RegistryPlanRequest, principal: Auth) -> RegistryImportPlan:
    """What importing an MCP Registry ``server.json`` entry would register, and the inputs it takes."""
    return registry_imports.import_plan(body)


@router.get("")
async def list_servers(
    principal: Auth,
    b: Conns,
    status_filter: Annotated[ServerStatus | None, Query(alias="status")] = None,
    include_tools: bool = False,
    namespace: Annotated[str | None, Query(pattern=NAMESPACE_PATTERN)] = None,
    agent: Annotated[str | None, Query(min_length=1, max_length=256, pattern=NO_NUL)] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> ServerList:
    """A page of the caller's servers, optionally by status and with their tools (the owner sees every
    namespace, or the one ``namespace`` names); with ``agent`` only the servers that principal
    registered, newest first."""
    request = ListServersRequest(
        status=status_filter,
        include_tools=include_tools,
        namespace=namespace,
        agent=agent,
        limit=limit,
        offset=offset,
    )
    return await reads.list_servers(b.db, principal, request)


@router.get("/{server_id}", responses=NOT_FOUND)
async def get_server(server_id: str, request: Request, principal: Auth, commands: Commands) -> ServerDetail:
    """One server with its masked connection config (a STDIO command's arguments only for a caller
    that manages the server: owner, admin, or the agent that registered it)."""
    row = await commands.server(server_id, caller_of(request, principal))
    return server_detail(row, command_visible=principal.manages_server(row["created_by"]))


@router.post("/{server_id}/connect", responses=MANAGED)
async def connect_server(server_id: str, request: Request, principal: Auth, commands: Commands) -> ConnectResponse:
    """Connect (idempotent, BR-002)."""
    return await commands.connect(server_id, caller_of(request, principal))


@router.post("/{server_id}/disconnect", responses=MANAGED)
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


@router.delete("/{server_id}", status_code=status.HTTP_204_NO_CONTENT, responses=MANAGED)
async def remove_server(server_id: str, request: Request, principal: Auth, commands: Commands) -> Response:
    """Remove a server with its tools, index entries and history (BR-008)."""
    await commands.remove(server_id, caller_of(request, principal))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{server_id}/tools", responses=NOT_FOUND)
async def list_server_tools(
    server_id: str, request: Request, principal: Auth, b: Conns, commands: Commands, include_schemas: bool = False
) -> ToolList:
    """The tools discovered on one server, with classified counts; held tools say why they are held."""
    return await reads.server_tools(b.db, commands, caller_of(request, principal), server_id, include_schemas)


@router.post("/{server_id}/instructions/approve", responses=MANAGED)
async def approve_server_instructions(
    server_id: str, request: Request, principal: Auth, commands: Commands
) -> ApproveInstructionsResponse:
    """Approve the server's current instructions, held since they changed: ``/mcp/{server}`` serves them again."""
    return await commands.approve_instructions(server_id, caller_of(request, principal))


@router.post("/{server_id}/tools/approve", responses=MANAGED)
async def approve_server_tools(
    server_id: str,
    request: Request,
    principal: Auth,
    commands: Commands,
    body: Annotated[ApproveToolsRequest | None, Body()] = None,
) -> ApproveToolsResponse:
    """Approve the current definitions of held tools (changed or new): they are listed and callable again."""
    names = body.tools if body else None
    return await commands.approve(server_id, names, caller_of(request, principal))


@router.post("/{server_id}/tools/classify", status_code=status.HTTP_202_ACCEPTED, responses=MANAGED)
async def classify_server_tools(
    server_id: str, request: Request, principal: Auth, commands: Commands
) -> ClassifyResponse:
    """Classify the server's unclassified tools again (after classification gave up: UNCLASSIFIED)."""
    return await commands.classify(server_id, caller_of(request, principal))


@router.post("/{server_id}/tools/refresh", status_code=status.HTTP_202_ACCEPTED, responses=MANAGED)
async def refresh_server_tools(
    server_id: str, request: Request, principal: Auth, commands: Commands
) -> RefreshResponse:
    """Run tool discovery again (answers at once; the new list arrives as an event)."""
    return await commands.refresh(server_id, caller_of(request, principal))


@router.get("/{server_id}/history", responses=NOT_FOUND)
async def server_history(
    server_id: str, request: Request, principal: Auth, b: Conns, commands: Commands
) -> list[HistoryEntry]:
    """The connection history of one server, oldest first."""
    return await reads.server_history(b.db, commands, caller_of(request, principal), server_id)
