"""A 2026-07-28 upstream's ``requestState``, relayed to its 2026-07-28 client through two replicas.

The conformance reference server (both eras) is the upstream ``everything``; each request goes to
the replica the test names (A: in this process, B: a ``toolmesh gateway`` of its own), as raw
2026-07-28 POSTs. The client gets the upstream's ``InputRequiredResult`` with the ``requestState``
sealed: the retry completes on either replica (the upstream getting its own state back), once; a
state presented again, by another principal, tampered with, or with another tool or arguments is
answered ``-32602`` and leaves the state to its holder. A handshake-era client of the same server
keeps its session and its elicitation.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import mcp_types
import pytest
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tests.conformance.kit import Kit, prepare
from tests.conformance.reference_2026 import reference_system
from tests.harness import ADMIN_TOKEN, RoleProcess, System, eventually, second_gateway
from tests.mcp_client import text_of
from tests.mcp_raw import modern_post
from toolmesh.platform.bus.topology import spent_states_bucket

pytestmark = pytest.mark.integration
TOOL = "test_input_required_result_request_state"
CONFIRM = {"confirm": {"action": "accept", "content": {"ok": True}}}
REFUSED = "unknown or expired requestState"


@dataclass
class Replicas:
    """Replica A (``system``, in this process) and replica B (a process of its own, on ``port_b``)."""

    system: System
    port_b: int

    @property
    def port_a(self) -> int:
        return self.system.settings.port


@pytest.fixture(scope="module")
def kit() -> Kit:
    return prepare()


@pytest.fixture
async def replicas(kit: Kit, nats_url: str, database_url: str) -> AsyncIterator[Replicas]:
    """Two gateway replicas with the 2026 reference server registered as ``everything`` (Streamable
    HTTP), both serving its tools."""
    async with (
        reference_system(kit, nats_url, database_url) as system,
        second_gateway(system, _serves_the_tool) as (
            _,
            port_b,
        ),
    ):
        yield Replicas(system, port_b)


async def _serves_the_tool(b: RoleProcess, port: int) -> bool:
    """Whether replica B (on ``port``) answers a 2026-07-28 ``tools/list`` of ``everything`` with
    ``TOOL`` (an ``AssertionError`` with its log when it exited)."""
    if b.process.poll() is not None:
        raise AssertionError(f"replica B exited ({b.process.returncode}): {b.stderr_text()[-4000:]}")
    try:
        answer = await post(port, ADMIN_TOKEN, "tools/list", {}, timeout=10)
    except (httpx.TransportError, ValueError):
        return False
    tools = answer.get("result", {}).get("tools", [])
    return any(tool.get("name") == TOOL for tool in tools)


async def post(port: int, token: str, method: str, params: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    """One 2026-07-28 request to ``/mcp/everything`` on the replica at ``port``; the JSON-RPC answer."""
    url = f"http://127.0.0.1:{port}/mcp/everything"
    capabilities = {"elicitation": {}, "sampling": {}}
    return _answer(await modern_post(url, method, params, token=token, capabilities=capabilities, timeout=timeout))


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The response to request 1 in a JSON body or an SSE stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if message.get("id") == 1:
                    return dict(message)
        raise AssertionError(f"no answer in the stream: {response.text}")
    answer = response.json()
    assert isinstance(answer, dict), response.text
    return answer


async def call(
    port: int,
    name: str = TOOL,
    *,
    token: str = ADMIN_TOKEN,
    arguments: dict[str, Any] | None = None,
    state: str | None = None,
) -> dict[str, Any]:
    """``tools/call`` of ``name``; with ``state``, the retry that answers the confirmation."""
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if state is not None:
        params |= {"inputResponses": CONFIRM, "requestState": state}
    return await post(port, token, "tools/call", params)


async def first_round(port: int) -> str:
    """Round 1 on the replica at ``port``: the ``InputRequiredResult``'s (sealed) ``requestState``."""
    answer = await call(port)
    result = answer.get("result", {})
    assert result.get("resultType") == "input_required", answer
    assert set(result.get("inputRequests", {})) == {"confirm"}, answer
    state = result.get("requestState")
    assert isinstance(state, str), answer
    return state


def completed(answer: dict[str, Any]) -> None:
    """``answer`` is the reference server's result for a retry that brought its own state back."""
    assert answer.get("result", {}).get("content") == [{"type": "text", "text": "state-ok: requestState validated"}], (
        answer
    )


def refused(answer: dict[str, Any]) -> None:
    """``answer`` is the one ``-32602`` a state that is not the caller's to present gets."""
    error = answer.get("error", {})
    assert error.get("code") == mcp_types.INVALID_PARAMS, answer
    assert error.get("message") == REFUSED, answer


async def test_a_state_from_replica_a_completes_on_replica_b_and_is_sealed(replicas: Replicas) -> None:
    state = await first_round(replicas.port_a)
    assert "request-state" not in state and "nonce" not in state, state
    completed(await call(replicas.port_b, state=state))


async def test_a_state_is_spent_by_its_retry_on_every_replica(replicas: Replicas) -> None:
    state = await first_round(replicas.port_a)
    completed(await call(replicas.port_b, state=state))
    refused(await call(replicas.port_b, state=state))
    refused(await call(replicas.port_a, state=state))


async def test_another_principal_cannot_present_a_state_nor_spend_it(replicas: Replicas) -> None:
    other = (await replicas.system.create_key("other", "user", namespace="default"))["token"]
    assert "result" in await call(replicas.port_b, token=other), "the other key may call the tool itself"
    state = await first_round(replicas.port_a)
    refused(await call(replicas.port_b, token=other, state=state))
    refused(await call(replicas.port_a, token=other, state=state))
    completed(await call(replicas.port_b, state=state))


async def test_a_tampered_state_or_one_presented_with_another_request_is_refused(replicas: Replicas) -> None:
    state = await first_round(replicas.port_a)
    middle = len(state) // 2
    tampered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
    refused(await call(replicas.port_b, state=tampered))
    other_tool = "test_input_required_result_elicitation"
    assert (await call(replicas.port_b, other_tool)).get("result", {}).get("resultType") == "input_required"
    refused(await call(replicas.port_b, other_tool, state=state))
    other_arguments = {"plan": "other"}
    assert (await call(replicas.port_b, arguments=other_arguments)).get("result", {}).get("resultType") == (
        "input_required"
    )
    refused(await call(replicas.port_a, arguments=other_arguments, state=state))
    completed(await call(replicas.port_b, state=state))


async def _accept(context: ClientRequestContext, params: Any) -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action="accept", content={"response": "yes"})


async def test_a_handshake_client_of_the_same_server_keeps_its_session(replicas: Replicas) -> None:
    url = f"http://127.0.0.1:{replicas.port_b}/mcp/everything"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=_accept) as session,
    ):
        started = await session.initialize()
        assert started.protocol_version not in MODERN_PROTOCOL_VERSIONS, started
        result = await asyncio.wait_for(session.call_tool("test_elicitation", {"message": "proceed?"}), 60)
    assert text_of(result) == 'User response: action=accept, content={"response":"yes"}', result


async def test_an_upstreams_public_list_is_private_to_the_caller(replicas: Replicas) -> None:
    """The reference server marks its 2026-07-28 ``resources/list`` ``public`` for five minutes; through
    toolmesh (whose ``/mcp/everything`` names a server of the caller's namespace) it is ``private``."""
    listed = (await post(replicas.port_a, ADMIN_TOKEN, "resources/list", {}))["result"]
    assert any(r["uri"] == "test://stateless-static-text" for r in listed["resources"]), listed
    assert (listed["ttlMs"], listed["cacheScope"]) == (300000, "private"), listed


async def test_a_state_lives_no_longer_than_its_spent_mark(kit: Kit, nats_url: str, database_url: str) -> None:
    """Replica A made the spent-mark bucket with a 3 s TTL, replica B runs with a 60 s request timeout:
    B's states live 3 s, so a state is never redeemed again once its mark expired (it did before)."""
    longer = {"MCP_AGGREGATOR_REQUEST_TIMEOUT": "60"}
    async with (
        reference_system(kit, nats_url, database_url, request_timeout_seconds=3) as system,
        second_gateway(system, _serves_the_tool, longer) as (_, port_b),
    ):
        state = await first_round(port_b)
        completed(await call(port_b, state=state))
        refused(await call(port_b, state=state))
        spent = await spent_states_bucket(system.backends.js, 3)

        async def expired() -> bool:
            return (await spent.status()).values == 0

        await eventually(expired, timeout=30, what="the spent mark to expire")
        refused(await call(port_b, state=state))
