"""Resources: ``GET /api/v1/aggregator/servers/{id}/resources``, ``POST /api/v1/resources/read`` and
``POST /api/v1/aggregator/servers/{id}/resources/approve`` (held resource templates)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.resources import (
    ApproveTemplatesRequest,
    ApproveTemplatesResponse,
    FlaggedResource,
    ForwardMetadata,
    HeldTemplate,
    ReadResourceRequest,
    ReadResourceResponse,
    ResourceList,
)
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store import queries
from toolmesh.poisoning.holds import flagged_resources
from toolmesh_gateway import lookup
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.catalog import Catalog
from toolmesh_gateway.dependencies import backends, caller_of, catalog, forwarder, server_commands
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.server_commands import ServerCommands
from toolmesh_gateway.template_approvals import approve_templates, template_holds

router = APIRouter(prefix="/api/v1", tags=["resources"])
Auth = Annotated[Principal, Depends(require_principal)]
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 404, 409, 502, 503, 504)}
MANAGED: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (403, 404)}


@router.get("/aggregator/servers/{server_id}/resources", responses={404: {"model": ErrorBody}})
async def list_server_resources(
    server_id: str,
    request: Request,
    principal: Auth,
    b: Annotated[Backends, Depends(backends)],
    commands: Annotated[ServerCommands, Depends(server_commands)],
) -> ResourceList:
    """The resources and resource templates discovered on one server, as the upstream listed them."""
    await commands.server(server_id, caller_of(request, principal))
    resources, templates = await queries.list_resources(b.db, server_id)
    held = await template_holds(b.db, server_id)
    return ResourceList(
        resources=[r["item"] for r in resources],
        resource_templates=[t["item"] for t in templates],
        total=len(resources),
        held_templates=[HeldTemplate(uri_template=k, findings=v) for k, v in held.items()],
        flagged_resources=[
            FlaggedResource(uri=k, findings=v)
            for k, v in flagged_resources({r["uri"]: r["item"] for r in resources}).items()
        ],
    )


@router.post("/aggregator/servers/{server_id}/resources/approve", responses=MANAGED)
async def approve_server_templates(
    server_id: str,
    request: Request,
    principal: Auth,
    commands: Annotated[ServerCommands, Depends(server_commands)],
    body: Annotated[ApproveTemplatesRequest | None, Body()] = None,
) -> ApproveTemplatesResponse:
    """Approve the current definitions of held resource templates: they are listed and route reads again."""
    names = body.templates if body else None
    return await approve_templates(commands, server_id, names, caller_of(request, principal))


@router.post("/resources/read", responses=ERRORS)
async def read_resource(
    body: ReadResourceRequest,
    request: Request,
    principal: Auth,
    known: Annotated[Catalog, Depends(catalog)],
    forward: Annotated[Forwarder, Depends(forwarder)],
) -> ReadResourceResponse:
    """Read a resource (text, or binary as base64 ``blob``) from the server that serves its URI."""
    server = lookup.server_for_uri(known.view(principal.scope), body.uri, body.server_id)
    result = await forward.request(
        server, "resources/read", {"uri": body.uri}, timeout=body.timeout_seconds, caller=caller_of(request, principal)
    )
    return ReadResourceResponse(
        contents=list(result.get("contents") or []),
        metadata=ForwardMetadata(routed_to=server.name, server_id=server.id),
    )
