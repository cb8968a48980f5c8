"""``GET /api/v1/audit``: the audit log, newest first."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel


class AuditEntry(BaseModel):
    """One audited operation (security contract's fields plus the namespace and details)."""

    event: str
    event_id: str
    server_id: str | None
    server_name: str | None
    actor: str | None
    namespace: str
    ip_address: str | None
    timestamp: datetime
    details: dict[str, Any]


class AuditPage(BaseModel):
    """A page of entries and how many match the filter."""

    entries: list[AuditEntry]
    total: int
    limit: int
    offset: int
