"""The fuzz run's check: which 5xx are toolmesh's fault."""

from __future__ import annotations

import pytest

from tests.fuzz.checks import fault_of
from tests.fuzz.runner import config_text


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, {"anything": 1}),
        (422, {"detail": [], "error_code": "VALIDATION_ERROR"}),
        (503, {"detail": "Server unavailable: x", "error_code": "SERVER_UNAVAILABLE"}),
        (504, {"detail": "Timed out", "error_code": "EXECUTION_TIMEOUT"}),
    ],
)
def test_answers_that_are_not_faults(status: int, body: object) -> None:
    assert fault_of(status, body) is None


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (500, "Internal Server Error", "HTTP 500 without the contract's error body"),
        (500, {"detail": "x", "error_code": "ROUTING_FAILED"}, "HTTP 500 with error_code ROUTING_FAILED"),
        (503, {"detail": "x", "error_code": "BACKEND_UNAVAILABLE"}, "HTTP 503 with error_code BACKEND_UNAVAILABLE"),
        (502, {"detail": "x", "error_code": "SERVER_UNAVAILABLE"}, "HTTP 502 with error_code SERVER_UNAVAILABLE"),
        (503, {"error_code": "SERVER_UNAVAILABLE"}, "HTTP 503 with error_code SERVER_UNAVAILABLE"),
    ],
)
def test_faults_name_what_is_wrong(status: int, body: object, reason: str) -> None:
    assert fault_of(status, body) == reason


def test_the_run_enables_only_its_own_check_and_favours_existing_servers() -> None:
    text = config_text(["id-1"])
    assert "enabled = false" in text and "no_toolmesh_fault = { enabled = true }" in text
    assert 'values = ["id-1"]' in text and '"path.server_id"' in text
    assert "dictionaries" not in config_text([])
