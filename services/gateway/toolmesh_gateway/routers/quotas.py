"""``/api/v1/quotas``: durable quotas of keys, namespaces and servers."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response, status

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.quotas import QuotaInfo, QuotaList, QuotaRequest
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import caller_of
from toolmesh_gateway.quotas import QuotaService

router = APIRouter(prefix="/api/v1/quotas", tags=["quotas"])
Auth = Annotated[Principal, Depends(require_principal)]
MANAGED: dict[int | str, dict[str, Any]] = {403: {"model": ErrorBody}, 404: {"model": ErrorBody}}


async def quota_service(request: Request) -> QuotaService:
    """The process's quota service."""
    result: QuotaService = request.app.state.quotas
    return result


Quotas = Annotated[QuotaService, Depends(quota_service)]


@router.post("", status_code=status.HTTP_201_CREATED, responses={403: {"model": ErrorBody}, 409: {"model": ErrorBody}})
async def create_quota(body: QuotaRequest, request: Request, principal: Auth, service: Quotas) -> QuotaInfo:
    """Set a quota of tool calls per minute, day and/or month on a key, a namespace or a server."""
    return await service.create(body, caller_of(request, principal))


@router.get("")
async def list_quotas(request: Request, principal: Auth, service: Quotas) -> QuotaList:
    """The quotas of the caller's namespace (every namespace for the owner), with current counts."""
    return await service.list(caller_of(request, principal))


@router.get("/{quota_id}", responses={404: {"model": ErrorBody}})
async def get_quota(quota_id: str, request: Request, principal: Auth, service: Quotas) -> QuotaInfo:
    """One quota with its current counts."""
    return await service.get(quota_id, caller_of(request, principal))


@router.put("/{quota_id}", responses={**MANAGED, 409: {"model": ErrorBody}})
async def replace_quota(
    quota_id: str, body: QuotaRequest, request: Request, principal: Auth, service: Quotas
) -> QuotaInfo:
    """Change a quota's scope, target and limits."""
    return await service.replace(quota_id, body, caller_of(request, principal))


@router.delete("/{quota_id}", status_code=status.HTTP_204_NO_CONTENT, responses=MANAGED)
async def delete_quota(quota_id: str, request: Request, principal: Auth, service: Quotas) -> Response:
    """Remove a quota."""
    await service.delete(quota_id, caller_of(request, principal))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
