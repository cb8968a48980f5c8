"""``/api/v1/aggregator/state`` and ``/api/v1/aggregator/health``."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from toolmesh.contracts.aggregator import AggregatorState, HealthReport, HealthServers
from toolmesh.lifecycle import ServerStatus
from toolmesh.runtime import Backends
from toolmesh.store import queries
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import backends

router = APIRouter(prefix="/api/v1/aggregator", tags=["aggregator"])
Auth = Annotated[Principal, Depends(require_principal)]
Conns = Annotated[Backends, Depends(backends)]
S = ServerStatus


@router.get("/state")
async def aggregator_state(request: Request, _: Auth, b: Conns) -> AggregatorState:
    """Counts of servers by status and of tools, and how long this gateway has run."""
    counts = await queries.status_counts(b.db)
    tools = await queries.tool_counts(b.db)
    return AggregatorState(
        total_servers=sum(counts.values()),
        connected_servers=counts.get(S.CONNECTED, 0),
        degraded_servers=counts.get(S.DEGRADED, 0),
        disconnected_servers=counts.get(S.DISCONNECTED, 0),
        error_servers=counts.get(S.ERROR, 0),
        connecting_servers=counts.get(S.CONNECTING, 0),
        total_tools=tools["total"],
        classified_tools=tools["classified"],
        unclassified_tools=tools["total"] - tools["classified"],
        last_sync=tools["last_sync"],
        health_check_interval_seconds=b.settings.health_interval_seconds,
        uptime_seconds=round(time.monotonic() - request.app.state.started_at, 3),
    )


async def _check_database(b: Backends) -> str:
    try:
        await asyncio.wait_for(b.db.fetchval("SELECT 1"), 2)
    except Exception as exc:  # any failure of the probe is the finding we report
        return f"error: {type(exc).__name__}"
    return "ok"


async def _check_nats(b: Backends) -> str:
    if not b.nc.is_connected:
        return "error: disconnected"
    try:
        await asyncio.wait_for(b.js.account_info(), 2)
    except Exception as exc:  # any failure of the probe is the finding we report
        return f"error: {type(exc).__name__}"
    return "ok"


@router.get("/health")
async def aggregator_health(_: Auth, b: Conns) -> HealthReport:
    """Healthy when every backend answers and no server is in error; degraded with issues otherwise."""
    checks = {"database": await _check_database(b), "nats": await _check_nats(b)}
    issues = [f"{name} check failed: {value}" for name, value in checks.items() if value != "ok"]
    counts = await queries.status_counts(b.db) if checks["database"] == "ok" else {}
    total, errors = sum(counts.values()), counts.get(S.ERROR, 0)
    checks["sessions"] = "degraded" if errors else "ok"
    if errors:
        issues.append(f"{errors} servers in error state")
    return HealthReport(
        status="degraded" if issues else "healthy",
        checks=checks,
        servers=HealthServers(total=total, connected=counts.get(S.CONNECTED, 0), error=errors),
        issues=issues or None,
    )
