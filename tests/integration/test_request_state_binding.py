"""A 2026-07-28 ``requestState`` is bound to the principal and namespace that started the call.

Attack (issue 23, "Medium"): tenant B took the ``requestState`` of tenant A's sampling request,
answered it, and received A's tool result. Now B gets the spec's ``-32602`` and nothing of A's,
B's answer never reaches A's upstream, and A's own retry still completes with A's answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import mcp_types
import pytest

from tests.harness import System, running_system
from tests.mcp_raw import modern_post
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration


@dataclass
class TwoTenants:
    system: System
    tokens: dict[str, str]  # "a" (admin of team-a), "a2" (agent of team-a), "b" (admin of team-b)


@pytest.fixture
async def tenants(nats_url: str, database_url: str) -> AsyncIterator[TwoTenants]:
    """Team A's demo peer (its ``ask`` tool samples the client) in namespace ``team-a``."""
    async with running_system(nats_url, database_url) as system, launch_peer("http") as peer:
        tokens = {
            "a": (await system.create_key("admin-a", "admin", namespace="team-a"))["token"],
            "a2": (await system.create_key("agent-a", "agent", namespace="team-a"))["token"],
            "b": (await system.create_key("admin-b", "admin", namespace="team-b"))["token"],
        }
        body = {
            "name": "demo",
            "transport_type": peer.transport_type,
            "connection_config": peer.config,
            "namespace": "team-a",
            "allow_insecure": True,
        }
        created = await system.api.post("/api/v1/aggregator/servers", json=body)
        assert created.status_code == 201, created.text
        await system.wait_connected(created.json()["id"])
        yield TwoTenants(system, tokens)


async def _modern_call(system: System, token: str, params: dict[str, Any]) -> dict[str, Any]:
    """One stateless 2026-07-28 ``tools/call`` to ``/mcp``; the JSON-RPC response."""
    url = f"http://{system.settings.host}:{system.settings.port}/mcp"
    response = await modern_post(url, "tools/call", params, token=token, capabilities={"sampling": {}})
    answer: dict[str, Any] = response.json()
    assert response.status_code == (200 if "result" in answer else 400), response.text
    return answer


def _sampled(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "test-model"}


async def _resume(tenants: TwoTenants, who: str, question: str, state: str, key: str, answer: str) -> dict[str, Any]:
    """``who`` calls ``demo__ask`` again with ``state``, answering input request ``key`` with ``answer``."""
    params = {
        "name": "demo__ask",
        "arguments": {"question": question},
        "requestState": state,
        "inputResponses": {key: _sampled(answer)},
    }
    return await _modern_call(tenants.system, tenants.tokens[who], params)


async def _input_required(tenants: TwoTenants) -> tuple[str, str]:
    """A starts ``demo__ask``: the state it got back and the key of its one input request."""
    started = await _modern_call(
        tenants.system, tenants.tokens["a"], {"name": "demo__ask", "arguments": {"question": "secret plan of A"}}
    )
    result = started["result"]
    assert result.get("resultType") == "input_required", started
    (key,) = result["inputRequests"]
    return str(result["requestState"]), str(key)


@pytest.mark.parametrize("thief", ["b", "a2"])
async def test_a_request_state_answered_by_another_principal_gets_nothing(tenants: TwoTenants, thief: str) -> None:
    """Another tenant's key, or another key of the same namespace, presenting A's state: -32602."""
    state, key = await _input_required(tenants)
    stolen = await _resume(tenants, thief, "anything", state, key, "thief's answer")
    assert "result" not in stolen, stolen
    assert stolen["error"]["code"] == mcp_types.INVALID_PARAMS
    assert "secret plan" not in str(stolen) and "thief" not in str(stolen)

    owned = await _resume(tenants, "a", "secret plan of A", state, key, "A's own answer")
    text = owned["result"]["content"][0]["text"]
    assert text == "model said: A's own answer"  # the thief's answer never reached A's upstream


async def test_a_forged_or_altered_request_state_is_refused(tenants: TwoTenants) -> None:
    """A state toolmesh did not seal (or one altered by a byte) is the same -32602."""
    state, key = await _input_required(tenants)
    for forged in ("not-a-state", state[:-2] + ("AA" if not state.endswith("AA") else "BB")):
        refused = await _resume(tenants, "a", "x", forged, key, "x")
        assert refused["error"]["code"] == mcp_types.INVALID_PARAMS, refused
