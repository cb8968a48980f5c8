"""The Prometheus exposition carries the system contract's metric names."""

from __future__ import annotations

import pytest

from toolmesh.platform import metrics

pytestmark = pytest.mark.unit
CONTRACT_NAMES = (
    'mcp_aggregator_servers_total{status="connected"}',
    'mcp_aggregator_servers_total{status="error"}',
    "mcp_aggregator_tools_total ",
    "mcp_aggregator_tools_classified ",
    'mcp_aggregator_routing_duration_seconds_bucket{le="0.05"}',
    'mcp_aggregator_execution_duration_seconds_bucket{le="1.0",server="github-mcp"}',
    'mcp_aggregator_health_check_duration_seconds{server="github-mcp"}',
    'mcp_aggregator_health_check_failures_total{server="github-mcp"}',
)


def test_monitoring_contract_metric_names() -> None:
    metrics.set_inventory({"CONNECTED": 4, "ERROR": 1}, tools_total=125, tools_classified=120)
    metrics.record_routing(0.02)
    metrics.record_execution("github-mcp", 0.3)
    metrics.record_health_check("github-mcp", 0.045, failed=True)
    metrics.record_health_check("github-mcp", 0.045, failed=True)
    text = metrics.render().decode()
    for name in CONTRACT_NAMES:
        assert name in text, name
    assert 'mcp_aggregator_servers_total{status="connected"} 4.0' in text
    assert "mcp_aggregator_tools_total 125.0" in text
    assert 'mcp_aggregator_health_check_failures_total{server="github-mcp"} 2.0' in text
    assert 'mcp_aggregator_health_check_duration_seconds{server="github-mcp"} 0.045' in text
    assert "otel_scope" not in text and "target_info" not in text


def test_a_finished_reconcile_round_is_counted() -> None:
    def rounds() -> float:
        return metrics.registry().get_sample_value("mcp_aggregator_reconcile_rounds_total") or 0.0

    before = rounds()
    metrics.record_reconcile_round()
    metrics.record_reconcile_round()
    assert rounds() == before + 2


def test_scrape_time_gauges_read_what_is_watched_when_scraped() -> None:
    lag = {"seconds": 0.01}
    metrics.watch_inflight("unit-gateway", lambda: 3)
    metrics.watch_capacity("unit-gateway", lambda: 40)
    metrics.watch_loop_lag("unit-a", lambda: lag["seconds"])
    metrics.watch_loop_lag("unit-b", lambda: 0.0)
    unwatch = metrics.watch_lease_age(lambda: 7.5)
    lag["seconds"] = 5.0  # read at the scrape, not at the watch
    text = metrics.render().decode()
    assert 'mcp_aggregator_inflight_calls{role="unit-gateway"} 3.0' in text
    assert 'mcp_aggregator_capacity_calls{role="unit-gateway"} 40.0' in text
    assert "mcp_aggregator_event_loop_lag_seconds 5.0" in text  # the highest of the loops watched
    assert "mcp_aggregator_lease_oldest_age_seconds 7.5" in text
    unwatch()
    assert "mcp_aggregator_lease_oldest_age_seconds 7.5" not in metrics.render().decode()
