"""``/api/v1/policies``: policies on tool calls (CEL), per namespace or global."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response, status

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.policies import PolicyInfo, PolicyList, PolicyRequest, PolicyVersionList
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import caller_of
from toolmesh_gateway.policies.service import PolicyService

router = APIRouter(prefix="/api/v1/policies", tags=["policies"])
Auth = Annotated[Principal, Depends(require_principal)]
READ: dict[int | str, dict[str, Any]] = {403: {"model": ErrorBody}, 404: {"model": ErrorBody}}
WRITE: dict[int | str, dict[str, Any]] = {**READ, 409: {"model": ErrorBody}, 422: {"model": ErrorBody}}


async def policy_service(request: Request) -> PolicyService:
    """The process's policy service."""
    result: PolicyService = request.app.state.policies
    return result


Policies = Annotated[PolicyService, Depends(policy_service)]


@router.post("", status_code=status.HTTP_201_CREATED, responses=WRITE)
async def create_policy(body: PolicyRequest, request: Request, principal: Auth, service: Policies) -> PolicyInfo:
    """Create a policy: a CEL expression over a call's attributes and the effect when it is true."""
    return await service.create(body, caller_of(request, principal))


@router.get("", responses=READ)
async def list_policies(request: Request, principal: Auth, service: Policies) -> PolicyList:
    """The policies of the caller's namespace and the global ones (every policy for the owner)."""
    return await service.list(caller_of(request, principal))


@router.get("/{policy_id}", responses=READ)
async def get_policy(policy_id: str, request: Request, principal: Auth, service: Policies) -> PolicyInfo:
    """One policy."""
    return await service.get(policy_id, caller_of(request, principal))


@router.get("/{policy_id}/versions", responses=READ)
async def policy_versions(policy_id: str, request: Request, principal: Auth, service: Policies) -> PolicyVersionList:
    """Every version of a policy, newest first (a deletion is the last one)."""
    return await service.versions(policy_id, caller_of(request, principal))


@router.put("/{policy_id}", responses=WRITE)
async def replace_policy(
    policy_id: str, body: PolicyRequest, request: Request, principal: Auth, service: Policies
) -> PolicyInfo:
    """Replace a policy's definition (its version goes up by one; its namespace stays)."""
    return await service.replace(policy_id, body, caller_of(request, principal))


@router.delete("/{policy_id}", status_code=status.HTTP_204_NO_CONTENT, responses=READ)
async def delete_policy(policy_id: str, request: Request, principal: Auth, service: Policies) -> Response:
    """Delete a policy; every gateway stops applying it."""
    await service.delete(policy_id, caller_of(request, principal))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
