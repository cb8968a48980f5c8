"""An upstream that speaks only the 2026-07-28 era (``tests/peers/modern_only.py``: it refuses
``initialize``) is registered like any Streamable HTTP server and serves clients of both eras.

Handshake-era clients see one call: the upstream's input requests are put to them as server → client
requests. 2026-07-28 clients get the upstream's ``InputRequiredResult`` (its state sealed) and finish
the call on their retry. The upstream's list changes and resource updates, heard on its
``subscriptions/listen`` stream, reach discovery and the clients subscribed.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import pytest
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_client import Received, session_at, text_of
from tests.mcp_raw import modern_call
from tests.peers.launch import free_port, running_process

pytestmark = pytest.mark.integration
MODERN_ONLY = Path(__file__).parents[1] / "peers" / "modern_only.py"
ASKING = {"elicitation": {}, "sampling": {}}


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    port = free_port()
    async with (
        running_system(nats_url, database_url) as running,
        running_process([sys.executable, str(MODERN_ONLY), "--port", str(port)], port=port),
    ):
        config = {"base_url": f"http://127.0.0.1:{port}/mcp", "headers": {}}
        created = await running.register("modern", "HTTP", config, allow_insecure=True, new_tools="auto")
        await running.wait_connected(created["id"])
        yield running


async def modern(system: System, path: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 request to ``path`` from a client that can be asked for input."""
    url = f"{system.api.base_url}{path}"
    return await modern_call(url, method, params, token=ADMIN_TOKEN, capabilities=ASKING)


async def confirm_yes(context: ClientRequestContext, params: mcp_types.ElicitRequestParams) -> Any:
    return mcp_types.ElicitResult(action="accept", content={"confirm": True})


async def test_its_tools_are_listed(system: System) -> None:
    tools = await modern(system, "/mcp/modern", "tools/list", {})
    assert {"echo", "confirm", "think"} <= {tool["name"] for tool in tools["result"]["tools"]}, tools


async def test_a_rest_call_reaches_it(system: System) -> None:
    called = await system.api.post("/api/v1/tools/call", json={"name": "modern.echo", "arguments": {"text": "hi"}})
    assert called.status_code == 200, called.text
    assert "echo: hi" in called.text, called.text


@pytest.mark.parametrize("path, tool", [("/mcp/modern", "confirm"), ("/mcp", "modern.confirm")])
async def test_a_handshake_client_is_asked_as_in_its_era(system: System, path: str, tool: str) -> None:
    url = f"{system.api.base_url}{path}"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=confirm_yes) as session,
    ):
        await session.initialize()
        result = await session.call_tool(tool, {"action": "ship"})
    assert text_of(result) == "did ship", result


async def test_a_handshake_client_is_sampled(system: System) -> None:
    async with session_at(system, "/mcp/modern", sampling=True) as session:
        result = await session.call_tool("think", {"prompt": "why"})
    assert text_of(result) == "model said: echo of why", result


async def test_a_handshake_client_that_cannot_answer_gets_the_reason(system: System) -> None:
    async with session_at(system, "/mcp/modern") as session:  # declares neither elicitation nor sampling
        with pytest.raises(MCPError) as refused:
            await session.call_tool("confirm", {"action": "wipe"})
    assert "refused elicitation/create" in refused.value.error.message, refused.value.error


async def test_a_modern_client_answers_the_upstreams_question_on_its_retry(system: System) -> None:
    first = await modern(system, "/mcp/modern", "tools/call", {"name": "confirm", "arguments": {"action": "ship"}})
    asked = first["result"]
    assert asked["resultType"] == "input_required", first
    ((key, question),) = asked["inputRequests"].items()
    assert question["method"] == "elicitation/create", question
    retry = {
        "name": "confirm",
        "arguments": {"action": "ship"},
        "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
        "requestState": asked["requestState"],
    }
    done = await modern(system, "/mcp/modern", "tools/call", retry)
    assert done["result"]["content"][0]["text"] == "did ship", done
    again = await modern(system, "/mcp/modern", "tools/call", retry)  # the sealed state is spent
    assert again["error"]["code"] == mcp_types.INVALID_PARAMS, again


async def test_a_tool_added_upstream_is_discovered(system: System) -> None:
    called = await system.api.post("/api/v1/tools/call", json={"name": "modern.grow", "arguments": {}})
    assert called.status_code == 200, called.text

    async with session_at(system, "/mcp") as session:  # the aggregate lists what discovery recorded

        async def grown() -> bool:
            return "modern__grown" in {tool.name for tool in (await session.list_tools()).tools}

        await eventually(grown, what="the tool added upstream to be discovered")


async def test_a_subscribed_client_hears_the_resource_update(system: System) -> None:
    received = Received()
    async with session_at(system, "/mcp/modern", received=received) as session:
        await received.standalone_opened()
        await session.subscribe_resource("memo://note")
        result = await session.call_tool("set_note", {"text": "second"})
        assert text_of(result) == "noted", result
        await eventually(lambda: received.updated("memo://note"), what="the resource update")
        read = await session.read_resource("memo://note")
    assert [c.text for c in read.contents if isinstance(c, mcp_types.TextResourceContents)] == ["second"]


async def test_a_rest_call_that_needs_an_answer_is_refused_with_the_reason(system: System) -> None:
    called = await system.api.post("/api/v1/tools/call", json={"name": "modern.confirm", "arguments": {"action": "x"}})
    assert called.status_code >= 400, called.text
    assert "elicitation/create" in called.text, called.text


async def test_a_handshake_client_hears_the_log_of_its_own_call_only(system: System) -> None:
    loud, quiet = Received(), Received()
    async with (
        session_at(system, "/mcp/modern", received=loud) as caller,
        session_at(system, "/mcp/modern", received=quiet) as other,
    ):
        await caller.set_logging_level("info")
        await other.set_logging_level("info")
        result = await caller.call_tool("shout", {"text": "hey"})
        assert text_of(result) == "shouted", result

        def logged(received: Received) -> list[str]:
            kind = mcp_types.LoggingMessageNotification
            return [str(m.params.data) for m in received.messages if isinstance(m, kind)]

        assert await eventually(lambda: logged(loud), what="the caller's log message") == ["shouting hey"]
        await caller.call_tool("echo", {"text": "after"})  # the other client's log would have come first
        assert logged(quiet) == []


async def test_a_call_relayed_in_its_era_counts_against_a_quota_and_is_refused_past_it(system: System) -> None:
    created = await system.api.post("/api/v1/quotas", json={"scope": "server", "target": "modern", "per_day": 1})
    assert created.status_code == 201, created.text
    call = {"name": "modern.counted", "arguments": {"label": "quota"}}
    first = await modern(system, "/mcp", "tools/call", call)
    assert first["result"].get("isError") is not True, first
    refused = await modern(system, "/mcp", "tools/call", call)
    assert refused["result"]["isError"] is True, refused
    assert "Quota exceeded: 1 tool calls per day of server 'modern'" in refused["result"]["content"][0]["text"]
    assert (await system.api.delete(f"/api/v1/quotas/{created.json()['id']}")).status_code == 204
    runs = await system.api.post("/api/v1/tools/call", json={"name": "modern.runs", "arguments": {"label": "quota"}})
    assert "1" == runs.json()["content"][0]["text"]  # the refused call never reached the upstream
