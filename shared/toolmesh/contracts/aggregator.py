"""REST bodies of ``/state`` and ``/health`` and the common error body."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel


class ErrorBody(BaseModel):
    """Every error: ``{"detail", "error_code", "context"}``."""

    detail: str
    error_code: str
    context: dict[str, Any] | None = None


class AggregatorState(BaseModel):
    """``GET /api/v1/aggregator/state``."""

    total_servers: int
    connected_servers: int
    degraded_servers: int
    disconnected_servers: int
    error_servers: int
    connecting_servers: int
    total_tools: int
    classified_tools: int
    unclassified_tools: int
    held_tools: int = 0
    last_sync: datetime | None
    health_check_interval_seconds: float
    uptime_seconds: float


class HealthServers(BaseModel):
    total: int
    connected: int
    error: int


class HealthReport(BaseModel):
    """``GET /api/v1/aggregator/health``: healthy or degraded, with the failing checks as issues."""

    status: str
    checks: dict[str, str]
    servers: HealthServers
    issues: list[str] | None = None


class ResealReport(BaseModel):
    """``POST /api/v1/aggregator/credentials/reseal``: configs and upstream OAuth grants sealed again
    under the current key."""

    resealed: int
    """Server configs sealed again."""
    total: int
    """Server configs stored."""
    grants_resealed: int
    """Upstream OAuth grants (``mcp.upstream_tokens``) sealed again."""
    grants_total: int
    """Upstream OAuth grants stored."""
    key_id: str
