"""One health check of one server: probe, judge (BR-006), record, and have the verdict applied.

The failure count lives in the projection (``external_servers.consecutive_failures``): the check
reads it after probing (so it sees what the previous check wrote), adds its own outcome, and
publishes the new count in ``HealthChecked``, which the projector writes back. Checks of one
server never overlap (one per interval, each bounded under the interval), so whichever
health-worker runs the next check reads the count this one wrote.
"""

from __future__ import annotations

import logging
import time

from opentelemetry.trace import SpanKind

from toolmesh.contracts.commands import RECONNECT_REASON, CheckServerHealth, ConnectServer
from toolmesh.contracts.events import HealthChecked, ServerStatusChanged
from toolmesh.contracts.rpc import HealthVerdictRpc
from toolmesh.egress.http import EgressClients
from toolmesh.egress.policy import EgressPolicy
from toolmesh.errors import ToolmeshError
from toolmesh.health import CHECKED, CheckOutcome, Verdict, check_timeout, decide
from toolmesh.lifecycle import ServerStatus
from toolmesh.platform.bus.publishing import publish_command, publish_event
from toolmesh.platform.bus.requests import NoOwner, ask_owner
from toolmesh.platform.metrics import record_health_check
from toolmesh.platform.runtime import Backends
from toolmesh.platform.telemetry import mark_error, span
from toolmesh_health.monitoring import Row, health_state
from toolmesh_health.probes import probe_session, probe_url

log = logging.getLogger("toolmesh.health")
VERDICT_TIMEOUT_SECONDS = 5.0


class Checker:
    """Runs checks for one health-worker."""

    def __init__(self, backends: Backends, http: EgressClients, identity: str) -> None:
        self._b = backends
        self._http = http
        self.identity = identity

    async def run(self, command: CheckServerHealth) -> HealthChecked | None:
        """Check the server of ``command`` unless it is stale or the server is no longer checked."""
        if time.time() > command.deadline:
            log.info("dropping stale health check of window %d", command.window, extra={"server_id": command.server_id})
            return None
        state = await health_state(self._b.db, command.server_id)
        if state is None or ServerStatus(state["status"]) not in CHECKED:
            return None
        with span("health.check", kind=SpanKind.INTERNAL, attributes={"toolmesh.server": state["name"]}) as current:
            outcome = await self._probe(state)
            if not outcome.healthy:
                mark_error(current, outcome.error or "unhealthy")
        # Status and count are read again after the probe: the freshest values other checks wrote.
        state = await health_state(self._b.db, command.server_id)
        if state is None or ServerStatus(state["status"]) not in CHECKED:
            return None  # removed, disconnected or reconnecting while we probed
        return await self._record(state, command, outcome)

    async def _probe(self, state: Row) -> CheckOutcome:
        timeout = check_timeout(self._b.settings.health_check_timeout_seconds, self._b.settings.health_interval_seconds)
        if state["health_check_url"]:
            # Loopback and private addresses only if an owner or admin registered the server.
            egress = EgressPolicy.of(state["private_network"], self._b.settings.upstream_private_networks)
            return await probe_url(self._http.client(egress), state["health_check_url"], timeout)
        return await probe_session(self._b.bus, state["id"], timeout)

    async def _record(self, state: Row, command: CheckServerHealth, outcome: CheckOutcome) -> HealthChecked:
        verdict = decide(ServerStatus(state["status"]), int(state["consecutive_failures"]), outcome)
        event = HealthChecked(
            server_id=state["id"],
            namespace=state["namespace"],
            healthy=outcome.healthy,
            counted=outcome.counted,
            response_time_ms=outcome.response_time_ms,
            consecutive_failures=verdict.consecutive_failures,
            error=outcome.error,
            method="http" if state["health_check_url"] else "ping",
            window=command.window,
            checked_by=self.identity,
        )
        await publish_event(self._b.js, event)
        seconds = (outcome.response_time_ms or 0.0) / 1000
        record_health_check(state["name"], seconds, failed=not outcome.healthy and outcome.counted)
        if verdict.warning:
            log.warning(
                "health check of %s: %s (failures: %d)",
                state["name"],
                verdict.warning,
                verdict.consecutive_failures,
                extra={"server": state["name"]},
            )
        if verdict.status is not None:
            await self._apply(state, verdict, outcome)
        return event

    async def _apply(self, state: Row, verdict: Verdict, outcome: CheckOutcome) -> None:
        """Hand the verdict to the owner of the session; publish it ourselves when there is none."""
        assert verdict.status is not None and verdict.history is not None
        log.warning(
            "health: %s -> %s after %d failures",
            state["status"],
            verdict.status,
            verdict.consecutive_failures,
            extra={"server": state["name"]},
        )
        rpc = HealthVerdictRpc(
            status=verdict.status,
            history=verdict.history,
            error=outcome.error,
            consecutive_failures=verdict.consecutive_failures,
            reconnect=verdict.reconnect,
        )
        try:
            await ask_owner(self._b.bus, state["id"], "health", rpc, timeout=VERDICT_TIMEOUT_SECONDS)
        except NoOwner:
            await self._apply_without_owner(state, rpc)
        except ToolmeshError as exc:
            log.error("the owner did not apply the health verdict: %s", exc.detail, extra={"server": state["name"]})

    async def _apply_without_owner(self, state: Row, rpc: HealthVerdictRpc) -> None:
        """No session-worker holds the server: record the change, and for ERROR ask any worker to reconnect."""
        details = {"consecutive_failures": rpc.consecutive_failures, "source": "health", "owner": None}
        error = f"Health check failed: {rpc.error}" if rpc.status is ServerStatus.ERROR else rpc.error
        await publish_event(
            self._b.js,
            ServerStatusChanged(
                server_id=state["id"],
                namespace=state["namespace"],
                status=rpc.status,
                previous_status=ServerStatus(state["status"]),
                error_message=error,
                history=rpc.history,
                details=details,
            ),
        )
        if rpc.reconnect:
            await publish_event(
                self._b.js,
                ServerStatusChanged(
                    server_id=state["id"],
                    namespace=state["namespace"],
                    status=ServerStatus.CONNECTING,
                    previous_status=ServerStatus.ERROR,
                    history="RECONNECTING",
                    details=details,
                ),
            )
            await publish_command(self._b.js, ConnectServer(server_id=state["id"], reason=RECONNECT_REASON))
