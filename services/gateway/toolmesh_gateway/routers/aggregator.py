"""``/api/v1/aggregator/state`` and ``/api/v1/aggregator/health``."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from toolmesh.contracts.aggregator import AggregatorState, ErrorBody, HealthReport, HealthServers, ResealReport
from toolmesh.contracts.keys import Role
from toolmesh.errors import Forbidden
from toolmesh.lifecycle import ServerStatus
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store.consistency import wait_for_projection
from toolmesh.rotation import reseal_under_current_key
from toolmesh_gateway import reads
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import backends
from toolmesh_gateway.health_checks import check_database, check_index, check_nats

router = APIRouter(prefix="/api/v1/aggregator", tags=["aggregator"])
probes = APIRouter(tags=["probes"])
Auth = Annotated[Principal, Depends(require_principal)]
Conns = Annotated[Backends, Depends(backends)]
S = ServerStatus


@router.get("/state")
async def aggregator_state(request: Request, principal: Auth, b: Conns) -> AggregatorState:
    """Counts of the caller's servers by status and of their tools, and how long this gateway has run."""
    return await reads.aggregator_state(b.db, b.settings, principal, request.app.state.started_at)


@router.get("/health", responses={503: {"model": HealthReport}})
async def aggregator_health(request: Request, principal: Auth, b: Conns, response: Response) -> HealthReport:
    """Healthy; degraded (200) with ``issues`` when servers are in error or degraded; unhealthy (503)
    when a backend (database, NATS) does not answer within a second, so a readiness probe fails."""
    (database, counts), nats, (index, embedder) = await asyncio.gather(
        check_database(b, principal.scope), check_nats(b), check_index(request)
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


@router.post("/credentials/reseal", responses={403: {"model": ErrorBody}})
async def reseal_credentials(request: Request, principal: Auth, b: Conns) -> ResealReport:
    """Owner only: seal every server's connection config and every upstream OAuth grant again under
    the current credential key (after ``MCP_CREDENTIAL_KEY`` was rotated with the old key in
    ``MCP_CREDENTIAL_KEY_PREVIOUS``)."""
    if principal.role is not Role.OWNER:
        raise Forbidden("Only the owner may reseal credentials", {"role": str(principal.role)})
    report, seq = await reseal_under_current_key(b, request.app.state.credential_box, principal.name)
    if seq:
        await wait_for_projection(b.db, seq, b.settings.projection_wait_seconds)
    return report


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
