"""``/api/v1/quotas``: durable quotas — tool calls per minute, per UTC day and per UTC month of one
key, one namespace or one server, counted across every gateway replica."""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import StrEnum
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolmesh.contracts.events import Event
from toolmesh.naming import MAX_COUNT, NAMESPACE_PATTERN, STORABLE_TEXT


class QuotaScope(StrEnum):
    """What a quota counts the calls of."""

    KEY = "key"
    NAMESPACE = "namespace"
    SERVER = "server"


class QuotaWindow(StrEnum):
    """A fixed calendar window of UTC time: the minute, the day, the month."""

    MINUTE = "minute"
    DAY = "day"
    MONTH = "month"


QUOTA_STREAMS = {
    QuotaWindow.MINUTE: ("TOOLMESH_QUOTA_MINUTE", 2 * 60.0),
    QuotaWindow.DAY: ("TOOLMESH_QUOTA_DAY", 2 * 86_400.0),
    QuotaWindow.MONTH: ("TOOLMESH_QUOTA_MONTH", 32 * 86_400.0),
}
"""The JetStream counter stream of each window, and how long it keeps a count after its last change
(longer than the window: a count outlives its window, then goes)."""


def counted(namespace: str, scope: QuotaScope, target: str) -> str:
    """The token naming what a quota counts (its namespace, scope and target, hashed: a target may hold
    characters a subject cannot): counts belong to it, not to the quota that limits it."""
    return hashlib.sha256(f"{namespace}\x00{scope}\x00{target}".encode()).hexdigest()[:40]


def quota_subject(window: QuotaWindow, period: str, counted_as: str) -> str:
    """The subject of one counter (``counted``) in one period (``20261127``) of ``window``."""
    return f"toolmesh.quota.{window}.{period}.{counted_as}"


class QuotaRequest(BaseModel):
    """``POST /api/v1/quotas`` and ``PUT /api/v1/quotas/{id}``.

    ``target`` is the key's name (scope ``key``), the namespace (scope ``namespace``; defaults to
    ``namespace``) or the server's name (scope ``server``); ``namespace`` is the caller's own unless the
    owner names another. At least one of the limits is set.
    """

    model_config = ConfigDict(extra="forbid")

    scope: QuotaScope
    target: str | None = Field(None, min_length=1, max_length=255, pattern=STORABLE_TEXT)
    namespace: str | None = Field(None, pattern=NAMESPACE_PATTERN)
    per_minute: int | None = Field(None, ge=1, le=MAX_COUNT)
    per_day: int | None = Field(None, ge=1, le=MAX_COUNT)
    per_month: int | None = Field(None, ge=1, le=MAX_COUNT)

    @model_validator(mode="after")
    def _limited(self) -> QuotaRequest:
        if self.per_minute is None and self.per_day is None and self.per_month is None:
            raise ValueError("set at least one of per_minute, per_day, per_month")
        if self.scope is not QuotaScope.NAMESPACE and self.target is None:
            raise ValueError(f"a {self.scope} quota names its target")
        return self


class QuotaInfo(BaseModel):
    """One quota, with the calls counted in each of its current windows."""

    id: str
    scope: QuotaScope
    target: str
    namespace: str
    per_minute: int | None
    per_day: int | None
    per_month: int | None
    usage: dict[QuotaWindow, int] = Field(default_factory=dict)
    """Calls counted in the current window of each limit (absent when the counts could not be read)."""
    created_by: str | None = None
    updated_at: datetime | None = None


class QuotaList(BaseModel):
    """``GET /api/v1/quotas``."""

    quotas: list[QuotaInfo]
    total: int


class QuotaState(BaseModel):
    """What a quota was or became, as the audit log records it."""

    scope: QuotaScope
    target: str
    per_minute: int | None
    per_day: int | None
    per_month: int | None


class QuotaChange(Event):
    """A quota was created, replaced or deleted: who (``actor``), from where, and the quota before and after
    (``None``: it did not exist). The projector writes it to the audit log."""

    quota_id: str
    before: QuotaState | None = None
    after: QuotaState | None = None
    ip_address: str | None = None


class QuotaCreated(QuotaChange):
    """A quota was created (``before`` is None)."""

    subject: ClassVar[str] = "toolmesh.evt.quota.created"


class QuotaUpdated(QuotaChange):
    """A quota was replaced (``PUT``): both states."""

    subject: ClassVar[str] = "toolmesh.evt.quota.updated"


class QuotaDeleted(QuotaChange):
    """A quota was deleted (``after`` is None)."""

    subject: ClassVar[str] = "toolmesh.evt.quota.deleted"
