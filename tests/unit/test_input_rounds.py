"""``upstream.input_rounds``: each retry carries the answers and the state of the round it answers."""

from __future__ import annotations

from typing import Any

from toolmesh_session_worker.upstream import input_rounds

ELICIT = {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {"type": "object"}}}


class Client:
    """A ``ClientSide`` that answers every question with its count so far."""

    def __init__(self) -> None:
        self.asked = 0

    async def request(self, method: str, params: dict[str, Any] | None, call_id: str | None) -> dict[str, Any]:
        self.asked += 1
        return {"action": "accept", "content": {"n": self.asked}}

    async def notification(self, method: str, params: dict[str, Any] | None, call_id: str | None) -> None:
        return None


async def test_a_round_without_a_state_sends_none_of_an_earlier_round() -> None:
    answers = [
        {"resultType": "input_required", "inputRequests": {"a": ELICIT}, "requestState": "first"},
        {"resultType": "input_required", "inputRequests": {"b": ELICIT}},
        {"content": []},
    ]
    sent: list[dict[str, Any]] = []

    async def send(params: dict[str, Any], left: float) -> dict[str, Any]:
        sent.append(params)
        return answers[len(sent) - 1]

    done = await input_rounds.completed(
        "up", "calling", {"name": "t"}, send, client_side=Client(), call_id="c1", timeout=10
    )
    assert done == {"content": []}
    assert sent[1] == {
        "name": "t",
        "inputResponses": {"a": {"action": "accept", "content": {"n": 1}}},
        "requestState": "first",
    }
    assert sent[2] == {"name": "t", "inputResponses": {"b": {"action": "accept", "content": {"n": 2}}}}
