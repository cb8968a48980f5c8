"""Health monitoring against real peers: BR-006 transitions, EC-001 backoff, EC-010 frozen sessions,
scale-out of the health-workers, scheduler handover, and /metrics."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import nats
import nats.aio.client
import pytest

from tests.harness import RoleProcess, System, eventually, running_system
from tests.peers.health_endpoint import HealthEndpoint
from tests.peers.launch import launch_peer
from toolmesh.contracts.events import HealthChecked
from toolmesh.contracts.rpc import CallToolRpc, PingRpc
from toolmesh.errors import ServerUnavailable
from toolmesh.platform import metrics, processes
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.nats_bus import NatsBus
from toolmesh.platform.bus.requests import NoOwner, ask_owner, reply_result
from toolmesh.platform.bus.topology import leases_bucket
from toolmesh_health.scheduler import SCHEDULER_LEASE
from toolmesh_health.worker import HealthWorker

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
CORE_ROLES = ["gateway", "session-worker", "projector"]
FAST_HEALTH: dict[str, Any] = {
    "health_interval_seconds": 0.5,
    "health_check_timeout_seconds": 0.3,
    "reconnect_backoff_seconds": (0.2, 0.4, 0.8, 1.6),
}


async def true_when(condition: bool) -> bool:
    """An awaitable condition for ``eventually`` over values the test's own callbacks update."""
    return condition


@contextlib.asynccontextmanager
async def bus_connection(nats_url: str) -> AsyncIterator[nats.aio.client.Client]:
    """A NATS connection of the test's own (not the system's: no in-process shortcut to owners)."""
    connection = await nats.connect(nats_url, connect_timeout=10)
    try:
        yield connection
    finally:
        await connection.close()


async def history_rows(system: System, server_id: str) -> list[dict[str, Any]]:
    response = await system.api.get(f"{SERVERS}/{server_id}/history")
    rows: list[dict[str, Any]] = response.json()
    return rows


def status_trail(rows: list[dict[str, Any]]) -> list[str]:
    """The history without the per-check rows and tool snapshots (a reconnect's discovery may land late)."""
    return [r["event_type"] for r in rows if r["event_type"] not in ("HEALTH_FAILED", "TOOLS_DISCOVERED")]


async def wait_history(system: System, server_id: str, event_type: str, *, after: int = 0, timeout: float = 30) -> int:
    """Index of the first ``event_type`` row at or after ``after``."""

    async def probe() -> int | None:
        rows = await history_rows(system, server_id)
        for index in range(after, len(rows)):
            if rows[index]["event_type"] == event_type:
                return index + 1  # truthy even for row 0
        return None

    return await eventually(probe, timeout=timeout, what=f"{event_type} in the history") - 1


@contextlib.asynccontextmanager
async def health_events(system: System) -> AsyncIterator[list[HealthChecked]]:
    """Every ``HealthChecked`` published while the block runs."""
    seen: list[HealthChecked] = []

    async def on_event(msg: Any) -> None:
        seen.append(HealthChecked.model_validate_json(msg.data))

    sub = await system.backends.nc.subscribe(HealthChecked.subject, cb=on_event)
    try:
        yield seen
    finally:
        await sub.unsubscribe()


@contextlib.asynccontextmanager
async def extra_health_worker(system: System) -> AsyncIterator[HealthWorker]:
    """Another health-worker in this process (its own identity and stop switch)."""
    stop = asyncio.Event()
    worker = HealthWorker(system.backends)
    task = asyncio.create_task(worker.run(stop))
    try:
        yield worker
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def check_404_is_a_warning_not_counted(system: System, server_id: str, health: HealthEndpoint) -> None:
    """A 404 from the health URL: a configuration warning, recorded but not counted."""
    health.mode = "missing"
    start = len(await history_rows(system, server_id))
    await wait_history(system, server_id, "HEALTH_FAILED", after=start)
    seen = health.requests
    await eventually(lambda: true_when(health.requests >= seen + 3), what="three more checks")
    detail = await system.server(server_id)
    assert detail["status"] == "CONNECTED" and detail["consecutive_failures"] == 0
    assert "404" in detail["last_error"]
    rows = (await history_rows(system, server_id))[start:]
    assert all(r["details"]["counted"] is False for r in rows if r["event_type"] == "HEALTH_FAILED")
    assert status_trail(rows) == []


async def check_500s_degrade_then_error_and_reconnect(system: System, server_id: str, health: HealthEndpoint) -> None:
    """HTTP 500s: a warning at 1, DEGRADED at 2, ERROR at 3 and a reconnect, after which the count resets."""
    start = len(await history_rows(system, server_id))
    health.script = ["error", "error", "error"]  # then healthy again once reconnected
    health.mode = "ok"
    error_at = await wait_history(system, server_id, "ERROR", after=start)
    await wait_history(system, server_id, "RECONNECT", after=error_at)
    rows = (await history_rows(system, server_id))[start:]
    # a 404 check still in flight when the script started lands after ``start``: it is not counted
    counted = [r for r in rows if r["details"].get("counted") is not False]
    trail = [(r["event_type"], r["details"].get("consecutive_failures")) for r in counted]
    assert trail[:5] == [
        ("HEALTH_FAILED", 1),
        ("HEALTH_FAILED", 2),
        ("DEGRADED", 2),
        ("HEALTH_FAILED", 3),
        ("ERROR", 3),
    ]
    assert status_trail(rows)[:4] == ["DEGRADED", "ERROR", "RECONNECTING", "RECONNECT"]
    error_row = rows[4]
    assert error_row["details"]["error_message"].startswith("Health check failed: Health check URL answered HTTP 500")
    detail = await system.wait_status(server_id, "CONNECTED")
    assert "500" in detail["last_error"]

    async def reset() -> bool:
        detail = await system.server(server_id)
        return detail["status"] == "CONNECTED" and detail["consecutive_failures"] == 0

    await eventually(reset, what="the failure count to reset after the reconnect")


async def check_timeouts_count_and_success_recovers(system: System, server_id: str, health: HealthEndpoint) -> None:
    """Timeouts count as failures; a success brings DEGRADED back (RECOVERED)."""
    start = len(await history_rows(system, server_id))
    health.script = ["hang", "hang"]
    await wait_history(system, server_id, "RECOVERED", after=start)
    detail = await system.wait_status(server_id, "CONNECTED")
    assert detail["consecutive_failures"] == 0 and "timed out" in detail["last_error"]
    rows = (await history_rows(system, server_id))[start:]
    assert status_trail(rows)[:2] == ["DEGRADED", "RECOVERED"]
    assert all("timed out" in r["details"]["error"] for r in rows if r["event_type"] == "HEALTH_FAILED")


async def test_br006_health_url_200_404_500_timeout(nats_url: str, database_url: str) -> None:
    async with (
        running_system(nats_url, database_url, **FAST_HEALTH) as system,
        HealthEndpoint() as health,
        launch_peer("stdio") as peer,
    ):
        created = await system.register("checked", "STDIO", peer.config, health_check_url=health.url)
        server_id = created["id"]
        await system.wait_connected(server_id)

        async def checked_ok() -> dict[str, Any] | None:
            detail = await system.server(server_id)
            return detail if detail["last_health_check"] and detail["last_response_time_ms"] is not None else None

        detail = await eventually(checked_ok, what="a first successful health check")
        assert detail["status"] == "CONNECTED" and detail["consecutive_failures"] == 0

        await check_404_is_a_warning_not_counted(system, server_id, health)
        await check_500s_degrade_then_error_and_reconnect(system, server_id, health)
        await check_timeouts_count_and_success_recovers(system, server_id, health)


async def test_ec010_frozen_server_is_reconnected_and_calls_wait(nats_url: str, database_url: str) -> None:
    overrides = {**FAST_HEALTH, "connection_timeout_seconds": 1.0, "reconnect_hold_seconds": 15.0}
    async with (
        running_system(nats_url, database_url, **overrides) as system,
        launch_peer("http") as peer,
        bus_connection(nats_url) as bus,  # its own connection: requests go over the bus, in order
    ):
        assert peer.process is not None
        created = await system.register("freezer", peer.transport_type, peer.config)
        server_id = created["id"]
        await system.wait_connected(server_id)
        start = len(await history_rows(system, server_id))
        processes.send(peer.process.pid, signal.SIGSTOP)  # nothing closes: only pings time out
        try:
            await system.wait_status(server_id, "DEGRADED")
            await wait_history(system, server_id, "RECONNECTING", after=start)
            # A call arriving during the reconnect waits for it instead of failing at once. The owner
            # takes the bus's messages in order and its replies come back in order: once it has refused
            # the ping sent after the call (no session while reconnecting), the call has arrived, and
            # an answer to it would already be here.
            replies = await bus.subscribe(bus.new_inbox(), max_msgs=1)
            held = CallToolRpc(tool="echo", arguments={"text": "held"}, timeout_seconds=10)
            await bus.publish(verbs.CALL.subject(server_id), held.model_dump_json().encode(), reply=replies.subject)
            with pytest.raises(ServerUnavailable) as refused:
                await ask_owner(NatsBus(bus), server_id, "ping", PingRpc(timeout_seconds=1), timeout=30)
            assert refused.value.body()["server"]["status"] == "CONNECTING"
            assert replies.pending_msgs == 0
        finally:
            processes.send(peer.process.pid, signal.SIGCONT)
        result = reply_result((await replies.next_msg(timeout=30)).data)
        assert result["content"][0]["text"] == "held"
        await system.wait_status(server_id, "CONNECTED")
        trail = status_trail((await history_rows(system, server_id))[start:])
        assert trail[:4] == ["DEGRADED", "ERROR", "RECONNECTING", "RECONNECT"]


async def test_ec001_reconnect_gives_up_after_five_attempts(nats_url: str, database_url: str) -> None:
    overrides = {
        **FAST_HEALTH,
        "connection_timeout_seconds": 1.0,  # a connect to the resumed peer must fit in it on a busy host
        "reconnect_backoff_seconds": (0.1, 0.1, 0.1, 0.1),
        "error_retry_seconds": (3.0,),
    }
    async with running_system(nats_url, database_url, **overrides) as system, launch_peer("http") as peer:
        assert peer.process is not None
        created = await system.register("gone-quiet", peer.transport_type, peer.config)
        server_id = created["id"]
        await system.wait_connected(server_id)
        start = len(await history_rows(system, server_id))
        processes.send(peer.process.pid, signal.SIGSTOP)
        try:

            async def gave_up() -> dict[str, Any] | None:
                detail = await system.server(server_id)
                message = detail["error_message"] or ""
                return detail if detail["status"] == "ERROR" and message.startswith("Reconnect failed") else None

            detail = await eventually(gave_up, what="the reconnect to give up")
            assert detail["error_message"].startswith("Reconnect failed after 5 attempts")
            assert detail["next_retry_at"] is not None  # BR-002: a network failure is retried later
            rows = (await history_rows(system, server_id))[start:]
            assert status_trail(rows)[-3:] == ["ERROR", "RECONNECTING", "ERROR"]
            assert (rows[-1]["details"]["attempts"], rows[-1]["details"]["error_kind"]) == (5, "network")
            with pytest.raises(NoOwner):
                await ask_owner(system.backends.bus, server_id, "ping", PingRpc(timeout_seconds=1), timeout=2)
        finally:
            processes.send(peer.process.pid, signal.SIGCONT)
        # The scheduled retry brings it back without anyone asking.
        await system.wait_connected(server_id)
        assert "CONNECTED" in status_trail((await history_rows(system, server_id))[start:])


async def test_br006_two_health_workers_check_each_server_once_per_interval(nats_url: str, database_url: str) -> None:
    interval = 1.0
    async with (
        running_system(nats_url, database_url, health_interval_seconds=interval) as system,
        launch_peer("http") as peer,
    ):
        ids = []
        for index in range(20):
            created = await system.register(f"fleet-{index:02d}", peer.transport_type, peer.config)
            ids.append(created["id"])
        for server_id in ids:
            await system.wait_connected(server_id)
        async with extra_health_worker(system) as second, health_events(system) as seen:

            async def seven_windows() -> bool | None:
                return len({event.window for event in seen}) >= 7 or None

            await eventually(seven_windows, timeout=interval * 30, what="seven health-check windows")
        by_window: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for event in seen:
            assert event.window is not None and event.healthy, event
            by_window[event.window][event.server_id] += 1
        windows = sorted(by_window)
        full = windows[1:-1]  # the first and last may be cut by the observation period
        assert len(full) >= 4, windows
        for window in full:
            assert dict(by_window[window]) == dict.fromkeys(ids, 1), window
        workers = {event.checked_by for event in seen}
        assert second.identity in workers and len(workers) == 2, workers


async def test_health_scheduler_hands_over_when_its_worker_is_killed(nats_url: str, database_url: str) -> None:
    interval = 1.0
    overrides = {"health_interval_seconds": interval, "lease_ttl_seconds": 1.5, "lease_renew_seconds": 0.3}
    async with (
        running_system(nats_url, database_url, roles=CORE_ROLES, **overrides) as system,
        launch_peer("http") as peer,
    ):
        created = await system.register("watched", peer.transport_type, peer.config)
        await system.wait_connected(created["id"])
        leases = LeaseTable(await leases_bucket(system.backends.js, 1.5), "observer")
        env = {"MCP_AGGREGATOR_HEALTH_INTERVAL": str(interval)}
        first = RoleProcess("health-worker", system.settings, env=env)
        try:
            holder = await eventually(lambda: leases.holder_of(SCHEDULER_LEASE), what="a scheduler", timeout=30)
            assert holder.split("/")[0].endswith(f":{first.pid}")
            async with extra_health_worker(system) as second, health_events(system) as seen:
                await eventually(lambda: true_when(len(seen) >= 2), what="checks by the first scheduler")
                first.kill()
                killed_at = max(e.window or 0 for e in seen)

                async def second_leads() -> bool:
                    return await leases.holder_of(SCHEDULER_LEASE) == second.identity

                await eventually(second_leads, what="the second worker to take the scheduler lease", timeout=10)
                await eventually(
                    lambda: true_when(any((e.window or 0) >= killed_at + 3 for e in seen)),
                    what="checks after the handover",
                )
            windows = sorted({e.window or 0 for e in seen})
            gaps = [b - a for a, b in itertools.pairwise(windows)]
            # The lease (1.5 s) expires within two intervals of 1 s: at most one window is missed.
            assert max(gaps) <= 2, windows
            assert all(e.checked_by == second.identity for e in seen if (e.window or 0) > killed_at + 1)
        finally:
            if first.process.poll() is None:
                first.kill()


async def test_metrics_expose_the_contract_names_to_the_owner(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, **FAST_HEALTH) as system, launch_peer("stdio") as peer:
        created = await system.register("metered", "STDIO", peer.config)
        await system.wait_connected(created["id"])

        async def scraped() -> str | None:
            response = await system.api.get("/metrics")  # the owner's key (no metrics token configured)
            assert response.status_code == 200
            text = response.text
            return text if 'mcp_aggregator_health_check_duration_seconds{server="metered"}' in text else None

        text = await eventually(scraped, what="health metrics on /metrics")
        assert 'mcp_aggregator_servers_total{status="connected"} 1.0' in text
        assert "mcp_aggregator_tools_total " in text and "mcp_aggregator_tools_classified " in text
        assert 'mcp_aggregator_health_check_failures_total{server="metered"} 0.0' in text
        assert 'mcp_aggregator_servers_total{status="error"} 0.0' in text
        # The call path records into the same process-wide meter that /metrics renders.
        metrics.record_routing(0.004)
        text = (await system.api.get("/metrics")).text
        assert 'mcp_aggregator_routing_duration_seconds_bucket{le="0.005"}' in text
        # Every other endpoint still needs a key; /health answers fast with the contract's fields.
        assert (await system.api.get("/api/v1/aggregator/health", headers={"Authorization": ""})).status_code == 401
        health = (await system.api.get("/api/v1/aggregator/health")).json()
        assert health["status"] == "healthy" and health["checks"]["database"] == "ok"
        assert health["servers"] == {"total": 1, "connected": 1, "error": 0}
        state = (await system.api.get("/api/v1/aggregator/state")).json()
        assert state["health_check_interval_seconds"] == 0.5 and state["connected_servers"] == 1


async def test_metrics_token_guards_metrics(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, roles=CORE_ROLES, metrics_token="scrape-me") as system:
        assert (await system.api.get("/metrics", headers={"Authorization": ""})).status_code == 401
        response = await system.api.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
        assert response.status_code == 200 and "mcp_aggregator_servers_total" in response.text
        assert response.headers["content-type"].startswith("text/plain")
