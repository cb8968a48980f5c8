"""Attribution of an upstream's server → client traffic to one of the clients sharing its session."""

from __future__ import annotations

import pytest

from toolmesh.contracts.rpc import ClientRef
from toolmesh_session_worker.clients import attribute, declared

pytestmark = pytest.mark.unit
ALICE = ClientRef(id="gw.alice", sampling=True)
BOB = ClientRef(id="gw.bob", elicitation=True)


def test_the_request_on_whose_stream_it_came_wins_however_many_are_in_flight() -> None:
    assert attribute("c2", {"c1": ALICE, "c2": BOB, "c3": ALICE}) == BOB


def test_without_a_stream_the_single_client_in_flight_gets_it() -> None:
    assert attribute(None, {"c1": ALICE, "c3": ALICE}) == ALICE
    assert attribute("gone", {"c1": ALICE}) == ALICE


def test_several_clients_in_flight_or_none_cannot_be_told_apart() -> None:
    assert attribute(None, {"c1": ALICE, "c2": BOB}) is None
    assert attribute(None, {}) is None
    assert attribute(None, {"c1": ALICE, "rest": None}) is None  # a REST call is a caller too


def test_a_request_needs_the_capability_the_client_declared() -> None:
    assert declared(ALICE, "sampling/createMessage") and not declared(ALICE, "elicitation/create")
    assert declared(BOB, "elicitation/create") and not declared(BOB, "roots/list")


def test_a_message_without_a_stream_rides_the_latest_request_of_its_client() -> None:
    from toolmesh_session_worker.clients import related_call

    inflight = {"c1": ALICE, "c2": BOB, "c3": ALICE}
    assert related_call(ALICE, "c1", inflight) == "c1"
    assert related_call(ALICE, None, inflight) == "c3"
    assert related_call(ClientRef(id="gw.carol"), None, inflight) is None
