"""The server state machine of the logic contract."""

from __future__ import annotations

import pytest

from toolmesh.errors import InvalidStateTransition
from toolmesh.lifecycle import SERVING, SESSION_WANTED, ServerStatus, can_transition, check_transition

S = ServerStatus
CONTRACT_TABLE = [
    (S.DISCONNECTED, S.CONNECTING),
    (S.CONNECTING, S.CONNECTED),
    (S.CONNECTING, S.ERROR),
    (S.CONNECTED, S.DISCONNECTED),
    (S.CONNECTED, S.DEGRADED),
    (S.CONNECTED, S.ERROR),
    (S.DEGRADED, S.CONNECTED),
    (S.DEGRADED, S.ERROR),
    (S.ERROR, S.CONNECTING),
]


@pytest.mark.parametrize(("current", "target"), CONTRACT_TABLE)
def test_every_transition_of_the_contract_is_allowed(current: ServerStatus, target: ServerStatus) -> None:
    check_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (S.DISCONNECTED, S.CONNECTED),
        (S.DISCONNECTED, S.DEGRADED),
        (S.CONNECTING, S.DEGRADED),
        (S.ERROR, S.CONNECTED),
        (S.ERROR, S.DEGRADED),
        (S.DEGRADED, S.CONNECTING),
    ],
)
def test_invalid_transitions_are_refused(current: ServerStatus, target: ServerStatus) -> None:
    assert not can_transition(current, target)
    with pytest.raises(InvalidStateTransition) as raised:
        check_transition(current, target)
    assert raised.value.status == 409
    assert raised.value.body()["error_code"] == "INVALID_STATE_TRANSITION"
    assert raised.value.context["current"] == current


def test_behaviour_by_state() -> None:
    assert {S.CONNECTED, S.DEGRADED} == SERVING  # execute and appear in search
    assert S.DISCONNECTED not in SESSION_WANTED and S.ERROR not in SESSION_WANTED
