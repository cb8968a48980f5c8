"""``/api/v1/aggregator/state`` and ``/api/v1/aggregator/health``."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from toolmesh.contracts.aggregator import AggregatorState, HealthReport, HealthServers
from toolmesh.lifecycle import ServerStatus
from toolmesh.runtime import Backends
from toolmesh.store import queries
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import backends
from toolmesh_gateway.health_checks import check_database, check_index, check_nats

router = APIRouter(prefix="/api/v1/aggregator", tags=["aggregator"])
probes = APIRouter(tags=["probes"])
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


@router.get("/health", responses={503: {"model": HealthReport}})
async def aggregator_health(request: Request, _: Auth, b: Conns, response: Response) -> HealthReport:
    """Healthy; degraded (200) with ``issues`` when servers are in error or degraded; unhealthy (503)
    when a backend (database, NATS) does not answer within a second, so a readiness probe fails."""
    (database, counts), nats, (index, embedder) = await asyncio.gather(
        check_database(b), check_nats(b), check_index(request)
    )
    checks = {"database": database, "nats": nats, "qdrant": index}
    issues = [f"{name} check failed: {value}" for name, value in checks.items() if value != "ok"]
    if embedder is not None:
        issues.append(f"embedding model {embedder}")
    total, errors, degraded = sum(counts.values()), counts.get(S.ERROR, 0), counts.get(S.DEGRADED, 0)
    checks["sessions"] = "degraded" if errors or degraded else "ok"
    if errors:
        issues.append(f"{errors} servers in error state")
    if degraded:
        issues.append(f"{degraded} servers degraded")
    status = "degraded" if issues else "healthy"
    if database != "ok" or nats != "ok":
        status = "unhealthy"
        response.status_code = 503
    return HealthReport(
        status=status,
        checks=checks,
        servers=HealthServers(total=total, connected=counts.get(S.CONNECTED, 0), error=errors),
        issues=issues or None,
    )


@probes.get("/livez")
async def liveness() -> dict[str, str]:
    """Kubernetes liveness: the process serves HTTP (no token, no details)."""
    return {"status": "alive"}


@probes.get("/readyz", responses={503: {"description": "a backend does not answer"}})
async def readiness(b: Conns, response: Response) -> dict[str, str]:
    """Kubernetes readiness: the database and NATS answer within a second (no token, no details)."""
    (database, _), nats = await asyncio.gather(check_database(b), check_nats(b))
    if database != "ok" or nats != "ok":
        response.status_code = 503
        return {"status": "unready"}
    return {"status": "ready"}
