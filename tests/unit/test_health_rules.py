"""BR-006 / EC-001 / EC-005 decision logic, without servers."""

from __future__ import annotations

import pytest

from toolmesh.health import (
    CheckOutcome,
    check_timeout,
    current_window,
    decide,
    judge_http_status,
    reconnect_delays,
)
from toolmesh.lifecycle import ServerStatus, can_transition

pytestmark = pytest.mark.unit
S = ServerStatus
FAIL = CheckOutcome.failed("boom")
OK = CheckOutcome.ok(3.0)


def test_br006_one_failure_warns_and_stays_connected() -> None:
    verdict = decide(S.CONNECTED, 0, FAIL)
    assert verdict.consecutive_failures == 1
    assert verdict.status is None and not verdict.reconnect
    assert verdict.warning == "boom"


def test_br006_two_failures_degrade() -> None:
    verdict = decide(S.CONNECTED, 1, FAIL)
    assert (verdict.consecutive_failures, verdict.status, verdict.history) == (2, S.DEGRADED, "DEGRADED")
    assert not verdict.reconnect


def test_br006_three_failures_error_and_reconnect() -> None:
    for status in (S.CONNECTED, S.DEGRADED):
        verdict = decide(status, 2, FAIL)
        assert (verdict.consecutive_failures, verdict.status, verdict.history) == (3, S.ERROR, "ERROR")
        assert verdict.reconnect
        assert can_transition(status, S.ERROR)


def test_br006_more_failures_stay_error() -> None:
    verdict = decide(S.DEGRADED, 5, FAIL)
    assert verdict.status is S.ERROR and verdict.consecutive_failures == 6


def test_br006_degraded_stays_degraded_on_second_failure_count() -> None:
    # A server already DEGRADED (count 2 was reached) does not re-publish DEGRADED.
    verdict = decide(S.DEGRADED, 1, FAIL)
    assert verdict.status is None and verdict.consecutive_failures == 2


def test_br006_success_resets_count() -> None:
    verdict = decide(S.CONNECTED, 1, OK)
    assert verdict.consecutive_failures == 0 and verdict.status is None


def test_br006_success_recovers_degraded() -> None:
    verdict = decide(S.DEGRADED, 2, OK)
    assert (verdict.consecutive_failures, verdict.status, verdict.history) == (0, S.CONNECTED, "RECOVERED")
    assert can_transition(S.DEGRADED, S.CONNECTED)


def test_br006_4xx_is_a_config_warning_not_counted() -> None:
    outcome = judge_http_status(404, 1.0)
    assert not outcome.healthy and not outcome.counted
    verdict = decide(S.CONNECTED, 1, outcome)
    assert verdict.consecutive_failures == 1 and verdict.status is None
    assert verdict.warning is not None and "404" in verdict.warning


def test_ec005_only_200_is_healthy() -> None:
    assert judge_http_status(200, 1.0).healthy
    for code in (201, 204, 301, 500, 502, 503):
        outcome = judge_http_status(code, 1.0)
        assert not outcome.healthy and outcome.counted, code
    assert judge_http_status(500, 2.5).response_time_ms == 2.5


def test_ec001_reconnect_backoff_1_2_4_8_for_five_attempts() -> None:
    assert reconnect_delays((1.0, 2.0, 4.0, 8.0), 5) == [1.0, 2.0, 4.0, 8.0]
    assert reconnect_delays((1.0, 2.0), 4) == [1.0, 2.0, 4.0]
    assert reconnect_delays((1.0,), 1) == []


def test_br006_check_timeout_is_5s_but_under_the_interval() -> None:
    assert check_timeout(5.0, 30.0) == 5.0
    assert check_timeout(5.0, 0.5) == pytest.approx(0.4)


def test_windows_are_shared_by_every_scheduler() -> None:
    assert current_window(59.9, 30.0) == 1
    assert current_window(60.0, 30.0) == 2
