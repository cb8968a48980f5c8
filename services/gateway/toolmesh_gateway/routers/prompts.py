"""Prompts: ``GET /api/v1/aggregator/servers/{id}/prompts`` and ``POST /api/v1/prompts/get``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.resources import ForwardMetadata, GetPromptRequest, GetPromptResponse, PromptList
from toolmesh.runtime import Backends
from toolmesh.store import queries
from toolmesh_gateway import lookup
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.catalog import Catalog
from toolmesh_gateway.dependencies import backends, caller_of, catalog, forwarder, server_commands
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.server_commands import ServerCommands

router = APIRouter(prefix="/api/v1", tags=["prompts"])
Auth = Annotated[Principal, Depends(require_principal)]
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 404, 502, 503, 504)}


@router.get("/aggregator/servers/{server_id}/prompts", responses={404: {"model": ErrorBody}})
async def list_server_prompts(
    server_id: str,
    request: Request,
    principal: Auth,
    b: Annotated[Backends, Depends(backends)],
    commands: Annotated[ServerCommands, Depends(server_commands)],
) -> PromptList:
    """The prompts discovered on one server, as the upstream listed them."""
    await commands.server(server_id, caller_of(request, principal))
    rows = await queries.list_prompts(b.db, server_id)
    return PromptList(prompts=[r["item"] for r in rows], total=len(rows))


@router.post("/prompts/get", responses=ERRORS)
async def get_prompt(
    body: GetPromptRequest,
    principal: Auth,
    known: Annotated[Catalog, Depends(catalog)],
    forward: Annotated[Forwarder, Depends(forwarder)],
) -> GetPromptResponse:
    """Get a prompt with its arguments filled in, from the server that has it (routing like tool calls)."""
    server, original = lookup.prompt_route(known.view(principal.scope), body.name, body.server_id)
    params = {"name": original, "arguments": body.arguments}
    result = await forward.request(server, "prompts/get", params, timeout=body.timeout_seconds)
    return GetPromptResponse(
        description=result.get("description"),
        messages=list(result.get("messages") or []),
        metadata=ForwardMetadata(routed_to=server.name, server_id=server.id),
    )
