"""``/api/v1/auth/keys``: API keys with roles, inside the caller's namespace."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response, status

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.keys import CreatedKey, CreateKeyRequest, KeyList
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import caller_of
from toolmesh_gateway.keys import KeyService

router = APIRouter(prefix="/api/v1/auth/keys", tags=["keys"])
Auth = Annotated[Principal, Depends(require_principal)]
FORBIDDEN: dict[int | str, dict[str, Any]] = {403: {"model": ErrorBody}}


async def key_service(request: Request) -> KeyService:
    """The process's key service."""
    result: KeyService = request.app.state.keys
    return result


Keys = Annotated[KeyService, Depends(key_service)]


@router.post("", status_code=status.HTTP_201_CREATED, responses={**FORBIDDEN, 409: {"model": ErrorBody}})
async def create_key(body: CreateKeyRequest, request: Request, principal: Auth, keys: Keys) -> CreatedKey:
    """Create a key; its token is in this response only (only a hash is stored)."""
    return await keys.create(body, principal, caller_of(request, principal))


@router.get("", responses=FORBIDDEN)
async def list_keys(principal: Auth, keys: Keys) -> KeyList:
    """The keys of the caller's namespace (every namespace for the owner); never their tokens."""
    return await keys.list(principal)


@router.delete("/{key_id}", status_code=status.HTTP_204_NO_CONTENT, responses={**FORBIDDEN, 404: {"model": ErrorBody}})
async def revoke_key(key_id: str, request: Request, principal: Auth, keys: Keys) -> Response:
    """Revoke a key: refused at once by every gateway."""
    await keys.revoke(key_id, principal, caller_of(request, principal))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
