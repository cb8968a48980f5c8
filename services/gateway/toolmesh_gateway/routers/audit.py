"""``GET /api/v1/audit``: the audit log of the caller's namespace (every namespace for the owner)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.api_requests import AuditRequest
from toolmesh.contracts.audit import AuditPage
from toolmesh.naming import NAMESPACE_PATTERN
from toolmesh.platform.runtime import Backends
from toolmesh_gateway import reads
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import Limit, Offset, backends

router = APIRouter(prefix="/api/v1/audit", tags=["audit"])
NO_NUL = r"^[^\x00]*$"
"""Postgres text cannot hold NUL: such a filter is a 422, not a database error."""
Auth = Annotated[Principal, Depends(require_principal)]
Conns = Annotated[Backends, Depends(backends)]


@router.get("", responses={403: {"model": ErrorBody}})
async def read_audit_log(
    principal: Auth,
    b: Conns,
    namespace: Annotated[str | None, Query(pattern=NAMESPACE_PATTERN)] = None,
    actor: Annotated[str | None, Query(max_length=256, pattern=NO_NUL)] = None,
    event: Annotated[
        str | None, Query(max_length=64, pattern=NO_NUL, description="e.g. server.registered, tool.called")
    ] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> AuditPage:
    """Audited operations and tool calls, newest first (admins: their namespace only)."""
    request = AuditRequest(namespace=namespace, actor=actor, event=event, limit=limit, offset=offset)
    return await reads.audit_log(b.db, principal, request)
