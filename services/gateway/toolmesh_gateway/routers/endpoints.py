"""``/api/v1/endpoints``: bundles served at ``/mcp/{name}``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response, status

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.endpoints import EndpointInfo, EndpointList, EndpointRequest
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import caller_of
from toolmesh_gateway.endpoints import EndpointService

router = APIRouter(prefix="/api/v1/endpoints", tags=["endpoints"])
Auth = Annotated[Principal, Depends(require_principal)]
MANAGED: dict[int | str, dict[str, Any]] = {403: {"model": ErrorBody}, 404: {"model": ErrorBody}}


async def endpoint_service(request: Request) -> EndpointService:
    """The process's endpoint service."""
    result: EndpointService = request.app.state.endpoints
    return result


Endpoints = Annotated[EndpointService, Depends(endpoint_service)]


@router.post("", status_code=status.HTTP_201_CREATED, responses={403: {"model": ErrorBody}, 409: {"model": ErrorBody}})
async def create_endpoint(body: EndpointRequest, request: Request, principal: Auth, service: Endpoints) -> EndpointInfo:
    """Create an endpoint (bundle): the selected tools, prompts and resources at ``/mcp/{name}``."""
    return await service.create(body, caller_of(request, principal))


@router.get("")
async def list_endpoints(request: Request, principal: Auth, service: Endpoints) -> EndpointList:
    """The endpoints of the caller's namespace (every namespace for the owner)."""
    return await service.list(caller_of(request, principal))


@router.get("/{endpoint_id}", responses={404: {"model": ErrorBody}})
async def get_endpoint(endpoint_id: str, request: Request, principal: Auth, service: Endpoints) -> EndpointInfo:
    """One endpoint."""
    return await service.get(endpoint_id, caller_of(request, principal))


@router.put("/{endpoint_id}", responses={**MANAGED, 409: {"model": ErrorBody}})
async def replace_endpoint(
    endpoint_id: str, body: EndpointRequest, request: Request, principal: Auth, service: Endpoints
) -> EndpointInfo:
    """Replace an endpoint's definition; its connected clients hear ``list_changed``."""
    return await service.replace(endpoint_id, body, caller_of(request, principal))


@router.delete("/{endpoint_id}", status_code=status.HTTP_204_NO_CONTENT, responses=MANAGED)
async def delete_endpoint(endpoint_id: str, request: Request, principal: Auth, service: Endpoints) -> Response:
    """Delete an endpoint."""
    await service.delete(endpoint_id, caller_of(request, principal))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
