"""Approvals of tool calls a policy put before a human: their record, what the API shows, the
decision an approver sends, and the audit events of their requests and decisions."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from toolmesh.contracts.events import Event
from toolmesh.naming import STORABLE_TEXT

APPROVAL_ID_PATTERN = r"^[0-9a-f]{32}$"
"""An approval's id: 32 hex digits (a key of the bucket; anything else names no approval)."""


class ApprovalState(StrEnum):
    """Where an approval stands; every state but ``pending`` is final."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    WITHDRAWN = "withdrawn"
    """The caller went away before anyone decided."""


class Approval(BaseModel):
    """One approval as approvers see it (``GET /api/v1/approvals``): what will run, and its decision."""

    id: str
    namespace: str
    caller: str
    """The name of the key (or user) whose call waits."""
    server_id: str
    server: str
    tool: str
    arguments: dict[str, Any]
    policy: str
    reason: str
    surface: str
    created: datetime
    deadline: datetime
    state: ApprovalState
    decided_by: str | None = None
    """Who decided: an approver's key name, ``client:<caller>`` for the client's user (elicitation)."""
    comment: str | None = None
    decided_at: datetime | None = None


class ApprovalList(BaseModel):
    """Pending and recent approvals, newest first."""

    approvals: list[Approval]


class ApprovalDecision(BaseModel):
    """The body of ``POST /api/v1/approvals/{id}/approve`` or ``/reject`` (optional)."""

    comment: str | None = Field(None, max_length=2000, pattern=STORABLE_TEXT)


class ApprovalRequested(Event):
    """A tool call waits for a human's decision (its arguments are never part of any event)."""

    subject: ClassVar[str] = "toolmesh.evt.approval.requested"
    approval_id: str
    server_name: str
    tool: str
    policy: str
    reason: str
    surface: str
    deadline: datetime


class ApprovalDecided(Event):
    """An approval ended: approved or rejected (``actor`` decided), expired, or withdrawn."""

    subject: ClassVar[str] = "toolmesh.evt.approval.decided"
    approval_id: str
    server_name: str
    tool: str
    state: ApprovalState
    comment: str | None = None
    caller: str
