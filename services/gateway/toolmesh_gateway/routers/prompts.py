"""Prompts: ``GET /api/v1/aggregator/servers/{id}/prompts``, ``POST /api/v1/prompts/get`` and
``POST /api/v1/aggregator/servers/{id}/prompts/approve``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.resources import (
    ApprovePromptsRequest,
    ApprovePromptsResponse,
    ForwardMetadata,
    GetPromptRequest,
    GetPromptResponse,
    PromptList,
)
from toolmesh.errors import PromptChanged, PromptNotFound
from toolmesh.platform.runtime import Backends
from toolmesh_gateway import lookup, reads
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.dependencies import backends, caller_of, catalog_feed, forwarder, server_commands
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.server_commands import ServerCommands

router = APIRouter(prefix="/api/v1", tags=["prompts"])
Auth = Annotated[Principal, Depends(require_principal)]
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 404, 409, 502, 503, 504)}
MANAGED: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (403, 404)}


@router.get("/aggregator/servers/{server_id}/prompts", responses={404: {"model": ErrorBody}})
async def list_server_prompts(
    server_id: str,
    request: Request,
    principal: Auth,
    b: Annotated[Backends, Depends(backends)],
    commands: Annotated[ServerCommands, Depends(server_commands)],
) -> PromptList:
    """The approved prompts of one server, as the upstream listed them, and the held ones by name."""
    return await reads.server_prompts(b.db, commands, caller_of(request, principal), server_id)


@router.post("/aggregator/servers/{server_id}/prompts/approve", responses=MANAGED)
async def approve_server_prompts(
    server_id: str,
    request: Request,
    principal: Auth,
    commands: Annotated[ServerCommands, Depends(server_commands)],
    body: Annotated[ApprovePromptsRequest | None, Body()] = None,
) -> ApprovePromptsResponse:
    """Approve the current definitions of held prompts (changed or new): they are listed and served again."""
    names = body.prompts if body else None
    return await commands.approve_prompts(server_id, names, caller_of(request, principal))


@router.post("/prompts/get", responses=ERRORS)
async def get_prompt(
    body: GetPromptRequest,
    request: Request,
    principal: Auth,
    feed: Annotated[CatalogFeed, Depends(catalog_feed)],
    forward: Annotated[Forwarder, Depends(forwarder)],
) -> GetPromptResponse:
    """Get a prompt with its arguments filled in, from the server that has it (routing like tool calls:
    a prompt not found, or held, is looked up again once the catalog caught up with the stream)."""
    view = feed.catalog.view(principal.scope)
    try:
        server, original = lookup.prompt_route(view, body.name, body.server_id)
    except (PromptNotFound, PromptChanged):
        if not await feed.catch_up():
            raise
        server, original = lookup.prompt_route(view, body.name, body.server_id)
    params = {"name": original, "arguments": body.arguments}
    result = await forward.request(
        server, "prompts/get", params, timeout=body.timeout_seconds, caller=caller_of(request, principal)
    )
    return GetPromptResponse(
        description=result.get("description"),
        messages=list(result.get("messages") or []),
        metadata=ForwardMetadata(routed_to=server.name, server_id=server.id),
    )
