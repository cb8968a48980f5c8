"""A 2026-07-28 ``InputRequiredResult`` round across gateway replicas: the call starts on replica A,
whose upstream request waits there for the client's answer; the retry reaches replica B (a load
balancer without stickiness), which hands it to A and answers with A's result. Another principal's
retry of the same state through B, or a state altered by a byte, gets the spec's ``-32602`` and
nothing of the call (before: every retry that reached B was ``-32602``, the call lost)."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest

from tests.harness import ADMIN_TOKEN
from tests.integration.test_mcp_replicas import Replicas, replicas
from tests.mcp_raw import modern_call

pytestmark = pytest.mark.integration


async def call_at(port: int, token: str, params: dict[str, Any]) -> dict[str, Any]:
    """One stateless ``tools/call`` to ``/mcp`` of the replica at ``port``; its JSON-RPC response."""
    url = f"http://127.0.0.1:{port}/mcp"
    return await modern_call(url, "tools/call", params, token=token, capabilities={"sampling": {}})


def retry(question: str, state: str, key: str, answer: str) -> dict[str, Any]:
    """The retry of ``remote__ask`` answering input request ``key`` with a sampled ``answer``."""
    sampled = {"role": "assistant", "content": {"type": "text", "text": answer}, "model": "test-model"}
    return {
        "name": "remote__ask",
        "arguments": {"question": question},
        "requestState": state,
        "inputResponses": {key: sampled},
    }


async def started_on_a(r: Replicas, question: str) -> tuple[str, str]:
    """The call started on replica A: its state and the key of its one input request."""
    started = await call_at(r.port_a, ADMIN_TOKEN, {"name": "remote__ask", "arguments": {"question": question}})
    result = started["result"]
    assert result.get("resultType") == "input_required", started
    (key,) = result["inputRequests"]
    return str(result["requestState"]), str(key)


async def test_a_retry_that_reaches_the_other_replica_completes(nats_url: str, database_url: str) -> None:
    async with replicas(nats_url, database_url) as r:
        for answer in ("first answer", "second answer"):
            state, key = await started_on_a(r, "who answers?")
            done = await call_at(r.port_b, ADMIN_TOKEN, retry("who answers?", state, key, answer))
            assert done["result"]["content"][0]["text"] == f"model said: {answer}", done


async def test_another_principal_or_an_altered_state_gets_nothing_through_the_other_replica(
    nats_url: str, database_url: str
) -> None:
    async with replicas(nats_url, database_url) as r:
        other = (await r.system.create_key("other-admin", "admin"))["token"]
        state, key = await started_on_a(r, "secret plan")
        stolen = await call_at(r.port_b, other, retry("secret plan", state, key, "thief's answer"))
        assert stolen["error"]["code"] == mcp_types.INVALID_PARAMS, stolen
        assert "secret plan" not in str(stolen) and "thief" not in str(stolen)
        altered = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
        refused = await call_at(r.port_b, ADMIN_TOKEN, retry("secret plan", altered, key, "x"))
        assert refused["error"]["code"] == mcp_types.INVALID_PARAMS, refused

        owned = await call_at(r.port_b, ADMIN_TOKEN, retry("secret plan", state, key, "the owner's answer"))
        assert owned["result"]["content"][0]["text"] == "model said: the owner's answer", owned
