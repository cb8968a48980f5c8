"""Prometheus metrics of the system contract, recorded through OpenTelemetry's metrics SDK.

One meter provider per process, built on first use (never at import), exported by OTel's
Prometheus reader into a registry of our own, so ``render()`` gives the text exposition format.

The hot path records with ``record_routing`` / ``record_execution``; the health-worker with
``record_health_check``. Inventory gauges (servers by status, tools) are not kept in memory: the
gateway reads them from Postgres at scrape time and hands them over with ``set_inventory`` just
before ``render()``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache

from opentelemetry.exporter.prometheus import PrometheusMetricReader

# The synchronous gauge is public API under the name ``_Gauge`` (still "experimental" in 1.x).
from opentelemetry.metrics import CallbackOptions, Counter, Histogram, Observation, _Gauge
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from toolmesh.lifecycle import ServerStatus

CONTENT_TYPE = CONTENT_TYPE_LATEST
ROUTING_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0)
LEASE_RENEWAL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
EXECUTION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class _Inventory:
    """The latest scrape-time snapshot of the read model."""

    servers_by_status: dict[str, int] = field(default_factory=dict)
    tools_total: int | None = None
    tools_classified: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Reads:
    """What a gauge shows at each scrape, read then from the callables watched: one observation per
    callable under its ``label`` (its key the label's value), or without a label the highest of them."""

    def __init__(self, label: str | None = None) -> None:
        self._label = label
        self._reads: dict[object, Callable[[], float]] = {}
        self._lock = threading.Lock()

    def watch(self, key: object, read: Callable[[], float]) -> Callable[[], None]:
        """Read ``read()`` at each scrape (the latest one under ``key`` counts); returns the unwatch."""
        with self._lock:
            self._reads[key] = read

        def unwatch() -> None:
            with self._lock:
                if self._reads.get(key) is read:
                    del self._reads[key]

        return unwatch

    def observe(self, _: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            reads = list(self._reads.items())
        if self._label is None:
            return [Observation(max(read() for _, read in reads))] if reads else []
        return [Observation(read(), {self._label: str(key)}) for key, read in reads]


@dataclass(frozen=True)
class _Instruments:
    registry: CollectorRegistry
    provider: MeterProvider
    routing: Histogram
    execution: Histogram
    health_duration: _Gauge
    health_failures: Counter
    limit_rejections: Counter
    reconcile_rounds: Counter
    user_sessions: Counter
    shed: Counter
    inflight: _Reads
    loop_lag: _Reads
    capacity: _Reads
    lease_age: _Reads
    deadline_drops: Counter
    lease_renewal: Histogram
    lease_step_downs: Counter
    policy_actions: Counter
    policy_errors: Counter
    result_scans: Counter
    inventory: _Inventory


@cache
def _instruments() -> _Instruments:
    registry = CollectorRegistry()
    reader = PrometheusMetricReader(disable_target_info=True, scope_info_enabled=False, registry=registry)
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("toolmesh")
    inventory = _Inventory()

    def scraped(name: str, description: str, *, label: str | None = None, unit: str = "") -> _Reads:
        reads = _Reads(label)
        meter.create_observable_gauge(name, callbacks=[reads.observe], unit=unit, description=description)
        return reads

    def servers(_: CallbackOptions) -> Iterable[Observation]:
        with inventory.lock:
            return [Observation(n, {"status": status}) for status, n in inventory.servers_by_status.items()]

    def tools(_: CallbackOptions) -> Iterable[Observation]:
        with inventory.lock:
            return [] if inventory.tools_total is None else [Observation(inventory.tools_total)]

    def classified(_: CallbackOptions) -> Iterable[Observation]:
        with inventory.lock:
            return [] if inventory.tools_classified is None else [Observation(inventory.tools_classified)]

    capacity = scraped(
        "mcp_aggregator_capacity_calls",
        "Calls a role admits at once now, by role: its ceiling, lowered while its event loop runs late",
        label="role",
    )
    loop_lag = scraped(
        "mcp_aggregator_event_loop_lag_seconds",
        "How late this process's event loop runs its callbacks (mean); load is shed past TOOLMESH_SHED_LOOP_LAG_MS",
        unit="s",
    )
    lease_age = scraped(
        "mcp_aggregator_lease_oldest_age_seconds",
        "Time since the least recently renewed lease a session-worker holds was last extended",
        unit="s",
    )
    meter.create_observable_gauge(
        "mcp_aggregator_servers_total", callbacks=[servers], description="External servers by status"
    )
    meter.create_observable_gauge("mcp_aggregator_tools_total", callbacks=[tools], description="External tools")
    inflight = scraped(
        "mcp_aggregator_inflight_calls", "Calls admitted and not finished, by role (this process)", label="role"
    )
    meter.create_observable_gauge(
        "mcp_aggregator_tools_classified", callbacks=[classified], description="External tools classified"
    )
    return _Instruments(
        registry=registry,
        provider=provider,
        routing=meter.create_histogram(
            "mcp_aggregator_routing_duration_seconds",
            unit="s",
            description="Time to resolve the route of a tool call",
            explicit_bucket_boundaries_advisory=list(ROUTING_BUCKETS),
        ),
        execution=meter.create_histogram(
            "mcp_aggregator_execution_duration_seconds",
            unit="s",
            description="Time of a tool call upstream, by server",
            explicit_bucket_boundaries_advisory=list(EXECUTION_BUCKETS),
        ),
        health_duration=meter.create_gauge(
            "mcp_aggregator_health_check_duration_seconds", unit="s", description="Latest health check duration"
        ),
        health_failures=meter.create_counter(
            "mcp_aggregator_health_check_failures_total", description="Health checks that failed (counted), by server"
        ),
        limit_rejections=meter.create_counter(
            "mcp_aggregator_limit_rejections_total",
            description="Requests refused by a resource limit, by limit (servers, tools, sessions)",
        ),
        reconcile_rounds=meter.create_counter(
            "mcp_aggregator_reconcile_rounds_total",
            description="Reconcile rounds a session-worker finished (flat while its reconciler is stuck)",
        ),
        user_sessions=meter.create_counter(
            "mcp_aggregator_user_sessions_total",
            description="Users' own upstream sessions (per-user OAuth servers) opened and closed, by event",
        ),
        shed=meter.create_counter(
            "mcp_aggregator_calls_shed_total",
            description="Calls refused by admission control, by role and reason (overloaded, fair_share, "
            "server_full, worker_full, busy)",
        ),
        inflight=inflight,
        loop_lag=loop_lag,
        capacity=capacity,
        lease_age=lease_age,
        deadline_drops=meter.create_counter(
            "mcp_aggregator_deadline_expired_total",
            description="Requests dropped unexecuted because their caller's deadline had passed, by role",
        ),
        lease_renewal=meter.create_histogram(
            "mcp_aggregator_lease_renewal_duration_seconds",
            unit="s",
            description="Round trip of one lease renewal to the leases bucket, by outcome",
            explicit_bucket_boundaries_advisory=list(LEASE_RENEWAL_BUCKETS),
        ),
        lease_step_downs=meter.create_counter(
            "mcp_aggregator_lease_step_downs_total",
            description="Servers a session-worker stopped serving because their lease went unrenewed too long",
        ),
        policy_actions=meter.create_counter(
            "mcp_aggregator_policy_actions_total",
            description="Tool calls a policy acted on (mode enforce) or would have (dry_run), by effect and mode",
        ),
        policy_errors=meter.create_counter(
            "mcp_aggregator_policy_evaluation_errors_total",
            description="Policy evaluations that failed on a call (a missing field, a wrong type): no match",
        ),
        result_scans=meter.create_counter(
            "mcp_aggregator_result_scans_total",
            description="Tool results the poisoning scanner read, by outcome (clean, flagged, skipped)",
        ),
        inventory=inventory,
    )


def record_routing(seconds: float) -> None:
    """One tool call's route resolution took ``seconds``."""
    _instruments().routing.record(seconds)


def record_execution(server: str, seconds: float) -> None:
    """One tool call on ``server`` (its name) took ``seconds`` upstream."""
    _instruments().execution.record(seconds, {"server": server})


def record_health_check(server: str, seconds: float, *, failed: bool) -> None:
    """One health check of ``server`` took ``seconds``; ``failed`` when it counted as a failure."""
    instruments = _instruments()
    instruments.health_duration.set(seconds, {"server": server})
    # Add 0 on success so the series exists (at 0) from the first check on.
    instruments.health_failures.add(1 if failed else 0, {"server": server})


def record_limit_rejection(limit: str) -> None:
    """A resource limit (``servers``, ``tools``, ``sessions``) refused something."""
    _instruments().limit_rejections.add(1, {"limit": limit})


def record_policy_action(effect: str, mode: str) -> None:
    """A policy denied, held or redacted one call (``mode`` enforce), or would have (``dry_run``)."""
    _instruments().policy_actions.add(1, {"effect": effect, "mode": mode})


def record_result_scan(outcome: str) -> None:
    """A tool result was scanned (``clean``, ``flagged``) or left unscanned (``skipped``: the scanner was behind)."""
    _instruments().result_scans.add(1, {"outcome": outcome})


def record_policy_errors(count: int) -> None:
    """``count`` policies failed to evaluate on one call (they did not match)."""
    _instruments().policy_errors.add(count)


def record_reconcile_round() -> None:
    """A session-worker finished one reconcile round (orphaned servers claimed, homes swept)."""
    _instruments().reconcile_rounds.add(1)


def record_user_sessions(event: str, count: int = 1) -> None:
    """``count`` users' own upstream sessions were ``opened`` or ``closed``."""
    _instruments().user_sessions.add(count, {"event": event})


def record_shed(role: str, reason: str) -> None:
    """Admission control of ``role`` (``gateway``, ``session_worker``) refused one call for ``reason``."""
    _instruments().shed.add(1, {"role": role, "reason": reason})


def watch_inflight(role: str, read: Callable[[], int]) -> None:
    """``read()`` tells, at each scrape, how many calls ``role`` admitted and has not finished in this
    process (nothing is recorded per call)."""
    _instruments().inflight.watch(role, read)


def watch_loop_lag(process: str, read: Callable[[], float]) -> None:
    """``read()`` tells, at each scrape, the mean lag of the event loop of ``process`` (the roles it
    runs; the latest one so named counts), in seconds."""
    _instruments().loop_lag.watch(process, read)


def watch_capacity(role: str, read: Callable[[], int]) -> None:
    """``read()`` tells, at each scrape, how many calls ``role`` admits at once now in this process."""
    _instruments().capacity.watch(role, read)


def record_deadline_expired(role: str) -> None:
    """``role`` dropped a request without executing it: its caller's deadline had passed."""
    _instruments().deadline_drops.add(1, {"role": role})


def record_lease_renewal(seconds: float, outcome: str) -> None:
    """One lease renewal took ``seconds``: ``renewed``, ``lost`` (expired or taken) or ``failed`` (no answer)."""
    _instruments().lease_renewal.record(seconds, {"outcome": outcome})


def record_lease_step_down() -> None:
    """A session-worker stepped down from a server whose lease passed its safety point."""
    _instruments().lease_step_downs.add(1)


def watch_lease_age(oldest: Callable[[], float]) -> Callable[[], None]:
    """Report ``oldest()`` (seconds) as the oldest lease's age at each scrape; returns the unwatch."""
    return _instruments().lease_age.watch(oldest, oldest)


def set_inventory(servers_by_status: Mapping[str, int], *, tools_total: int, tools_classified: int) -> None:
    """The read model's counts for the next ``render()`` (status names are lower-cased, every status shown)."""
    inventory = _instruments().inventory
    with inventory.lock:
        counts = {str(status).lower(): 0 for status in ServerStatus}
        counts.update({status.lower(): int(n) for status, n in servers_by_status.items()})
        inventory.servers_by_status = counts
        inventory.tools_total = tools_total
        inventory.tools_classified = tools_classified


def registry() -> CollectorRegistry:
    """The registry every metric of this process is exported into (what ``render()`` and an
    exposition app read)."""
    return _instruments().registry


def render() -> bytes:
    """Every metric of this process in the Prometheus text format."""
    return generate_latest(registry())
