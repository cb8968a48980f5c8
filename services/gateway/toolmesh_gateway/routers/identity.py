"""``GET /api/v1/auth/me``: who the caller's token belongs to (the console shows what that role may use)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from toolmesh.contracts.keys import Identity
from toolmesh_gateway.auth import Principal, require_signer

router = APIRouter(prefix="/api/v1/auth", tags=["keys"])
Auth = Annotated[Principal, Depends(require_signer)]


@router.get("/me")
async def who_am_i(principal: Auth) -> Identity:
    """The caller's key (or token subject), role and namespace (a key limited to MCP endpoints may ask)."""
    return Identity(
        key_id=principal.key_id,
        name=principal.name,
        role=principal.role,
        namespace=principal.namespace,
        manages=principal.manages,
    )
