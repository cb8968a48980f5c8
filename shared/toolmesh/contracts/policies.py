"""Policies on tool calls: the REST/NATS bodies and the events that carry every change.

A policy is a CEL expression over the attributes of a call (``toolmesh_gateway.policies.language``) and
an effect applied when it is true. ``namespace`` None is a global policy (every namespace; the
owner's alone to manage).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from toolmesh.contracts.events import Event
from toolmesh.naming import STORABLE_TEXT

PolicyEffect = Literal["allow", "deny", "require_approval", "redact"]
PolicyMode = Literal["enforce", "dry_run"]
MAX_EXPRESSION_CHARS = 4000
FIELD_PATH = re.compile(r"^[^.\s]+(\.[^.\s]+)*$")
"""A redacted field: a key of the result, dotted for nesting (``owner.email``)."""


class PolicyRequest(BaseModel):
    """A policy as created or replaced (``POST`` / ``PUT /api/v1/policies``)."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    expression: str = Field(min_length=1, max_length=MAX_EXPRESSION_CHARS, pattern=STORABLE_TEXT)
    effect: PolicyEffect
    reason: str | None = Field(default=None, max_length=500, pattern=STORABLE_TEXT)
    """Shown to the caller of a denied call and to the approver of a held one."""
    redact: list[Annotated[str, Field(min_length=1, max_length=500, pattern=STORABLE_TEXT)]] = Field(
        default_factory=list, max_length=50
    )
    """The result fields a ``redact`` policy removes."""
    namespace: str | None = None
    """The namespace it applies in; None: every namespace (a global policy, the owner's only)."""
    mode: PolicyMode = "enforce"
    """``dry_run``: logged and audited as it would act, never acting."""

    @field_validator("redact")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not FIELD_PATH.match(path) or len(path) > 200:
                raise ValueError(f"not a field path: {path!r} (keys joined by dots)")
        return paths

    @model_validator(mode="after")
    def _redact_only_with_its_effect(self) -> PolicyRequest:
        if (self.effect == "redact") != bool(self.redact):
            raise ValueError("'redact' lists the fields of a redact policy, and only of one")
        return self


class PolicyInfo(PolicyRequest):
    """A stored policy: its definition, version and who changed it last."""

    id: str
    version: int
    """1 when created, one more at each replacement (``GET /api/v1/policies/{id}/versions``)."""
    created_by: str | None = None
    created_at: datetime
    updated_by: str | None = None
    updated_at: datetime


class PolicyList(BaseModel):
    """The policies a caller may see: its namespace's and the global ones."""

    policies: list[PolicyInfo]
    total: int


class PolicyVersion(BaseModel):
    """One version of a policy as it was saved (or deleted)."""

    version: int
    name: str
    namespace: str | None
    expression: str
    effect: PolicyEffect
    reason: str | None
    redact: list[str]
    mode: PolicyMode
    deleted: bool
    actor: str | None
    at: datetime


class PolicyVersionList(BaseModel):
    """A policy's history, newest first."""

    versions: list[PolicyVersion]


class PolicySaved(Event):
    """A policy was created or replaced: its whole definition (the projector numbers the version)."""

    subject: ClassVar[str] = "toolmesh.evt.policy.saved"
    policy_id: str
    policy: PolicyRequest
    ip_address: str | None = None


class PolicyDeleted(Event):
    """A policy was deleted: every gateway stops applying it from this event on."""

    subject: ClassVar[str] = "toolmesh.evt.policy.deleted"
    policy_id: str
    name: str
    ip_address: str | None = None
