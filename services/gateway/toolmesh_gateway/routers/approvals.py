"""``/api/v1/approvals``: tool calls waiting for a human, and the decisions of approvers.

Only approvers see or decide them: the admins of the approval's namespace and the owner. A user or
agent key may not approve, not even its own call (the user of an MCP client that declared
elicitation answers through it instead, ``approvals.gate``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Request

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.approvals import APPROVAL_ID_PATTERN, Approval, ApprovalDecision, ApprovalList, ApprovalState
from toolmesh_gateway.approvals.gate import Approvals
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import Limit

router = APIRouter(prefix="/api/v1/approvals", tags=["approvals"])
REFUSED: dict[int | str, dict[str, Any]] = {403: {"model": ErrorBody}, 404: {"model": ErrorBody}}
DECIDED: dict[int | str, dict[str, Any]] = {**REFUSED, 409: {"model": ErrorBody}}


async def approver(principal: Annotated[Principal, Depends(require_principal)]) -> Principal:
    """The caller, when it may see and decide approvals (owner, admin)."""
    principal.require_manager("decide approvals")
    return principal


async def approvals(request: Request) -> Approvals:
    """The process's approvals."""
    result: Approvals = request.app.state.approvals
    return result


Approver = Annotated[Principal, Depends(approver)]
Gate = Annotated[Approvals, Depends(approvals)]
Comment = Annotated[ApprovalDecision | None, Body()]
ApprovalId = Annotated[str, Path(pattern=APPROVAL_ID_PATTERN)]


@router.get("", responses={403: {"model": ErrorBody}})
async def list_approvals(
    principal: Approver,
    gate: Gate,
    state: Annotated[ApprovalState | None, Query()] = None,
    limit: Limit = 100,
) -> ApprovalList:
    """Pending and recent approvals of the caller's namespace (every namespace for the owner), newest first."""
    return ApprovalList(approvals=await gate.listed(principal, state, limit))


@router.get("/{approval_id}", responses=REFUSED)
async def read_approval(approval_id: ApprovalId, principal: Approver, gate: Gate) -> Approval:
    """One approval, with the arguments of the call that waits."""
    return await gate.read(approval_id, principal)


@router.post("/{approval_id}/approve", responses=DECIDED)
async def approve(approval_id: ApprovalId, principal: Approver, gate: Gate, body: Comment = None) -> Approval:
    """Let the call run (409 when it was decided already or its deadline passed)."""
    return await gate.decide(approval_id, principal, True, body.comment if body else None)


@router.post("/{approval_id}/reject", responses=DECIDED)
async def reject(approval_id: ApprovalId, principal: Approver, gate: Gate, body: Comment = None) -> Approval:
    """Refuse the call: its caller gets 403 ``APPROVAL_REJECTED`` with the comment."""
    return await gate.decide(approval_id, principal, False, body.comment if body else None)
