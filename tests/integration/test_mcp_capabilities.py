"""Resources, prompts, completions and sampling through ``/mcp`` and ``/mcp/{server}``, and over REST."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_client import Received, sample_by_echo, session_at, text_of
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    """The demo peer registered over stdio (alpha) and Streamable HTTP (gamma)."""
    async with running_system(nats_url, database_url) as system, launch_peer("http") as http:
        for name, peer in {"alpha": None, "gamma": http}.items():
            if peer is None:
                async with launch_peer("stdio") as stdio:
                    created = await system.register(name, stdio.transport_type, stdio.config)
            else:
                created = await system.register(name, peer.transport_type, peer.config)
            await system.wait_connected(created["id"])
        yield system


async def test_a_server_is_served_unchanged_at_its_own_path(system: System) -> None:
    async with session_at(system, "/mcp/gamma") as session:
        assert session.server_info is not None and session.server_info.name == "demo"
        assert session.server_capabilities is not None and session.server_capabilities.resources is not None
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"echo", "add", "ask"} <= tools and not any("__" in t for t in tools)
        assert text_of(await session.call_tool("echo", {"text": "plain"})) == "plain"
        read = await session.read_resource("demo://items/42")
        assert isinstance(read.contents[0], mcp_types.TextResourceContents)
        assert read.contents[0].text == "item 42 of demo"
        prompt = await session.get_prompt("greet", {"name": "Ada"})
        assert "Ada" in str(prompt.messages[0].content)
        with pytest.raises(MCPError, match=r"demo://nope"):
            await session.read_resource("demo://nope")


async def test_the_aggregate_routes_resources_by_uri_and_names_prompts_like_tools(system: System) -> None:
    async with session_at(system, "/mcp") as session:
        resources = (await session.list_resources()).resources
        readme = [r for r in resources if str(r.uri) == "demo://readme"]
        assert len(readme) == 1 and readme[0].meta == {"toolmesh/server": "alpha"}  # a collision: alpha came first
        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["demo://items/{item}"]
        logo = (await session.read_resource("demo://logo")).contents[0]
        assert isinstance(logo, mcp_types.BlobResourceContents) and base64.b64decode(logo.blob) == bytes(range(16))
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        assert {"alpha__greet", "gamma__greet"} <= prompts
        got = await session.get_prompt("gamma__greet", {"name": "Lin"})
        assert "Lin" in str(got.messages[0].content)
        with pytest.raises(MCPError) as refused:  # the demo server has no completions: its own error passes through
            await session.complete(
                mcp_types.PromptReference(type="ref/prompt", name="alpha__greet"), {"name": "name", "value": "A"}
            )
        assert refused.value.code == mcp_types.METHOD_NOT_FOUND
        with pytest.raises(MCPError) as unknown:
            await session.read_resource("nothing://here")
        assert unknown.value.code == -32002


@pytest.mark.parametrize(("path", "tool"), [("/mcp", "gamma__ask"), ("/mcp", "alpha__ask"), ("/mcp/alpha", "ask")])
async def test_sampling_of_an_upstream_reaches_the_client_and_the_answer_returns(
    system: System, path: str, tool: str
) -> None:
    async with session_at(system, path, sampling=True) as session:
        result = await session.call_tool(tool, {"question": "two and two?"})
        assert text_of(result) == "model said: echo of two and two?", result


async def test_a_client_slow_to_answer_holds_up_no_other_client(system: System) -> None:
    other_done = anyio.Event()
    patient_asked = anyio.Event()

    async def slow(context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams) -> Any:
        patient_asked.set()
        with anyio.fail_after(20):  # answers only once the other client got its own answer
            await other_done.wait()
        return await sample_by_echo(context, params)

    async with (
        session_at(system, "/mcp", on_sample=slow) as patient,
        session_at(system, "/mcp", sampling=True) as quick,
    ):
        async with anyio.create_task_group() as tg:
            results: dict[str, str] = {}

            async def ask(session: ClientSession, tool: str, key: str) -> None:
                results[key] = text_of(await session.call_tool(tool, {"question": key}))
                if key == "quick":
                    other_done.set()

            tg.start_soon(ask, patient, "gamma__ask", "patient")
            with anyio.fail_after(20):
                await patient_asked.wait()  # the patient client's sampling request is pending now
            tg.start_soon(ask, quick, "alpha__ask", "quick")
    assert results == {"patient": "model said: echo of patient", "quick": "model said: echo of quick"}


async def test_roots_of_the_client_reach_the_upstream(system: System) -> None:
    async with session_at(system, "/mcp", sampling=True) as session:
        result = await session.call_tool("alpha__roots", {})
    assert text_of(result) == "file:///work/a,file:///work/b", result


async def test_a_client_without_sampling_gets_the_upstream_refused(system: System) -> None:
    async with session_at(system, "/mcp") as session:
        result = await session.call_tool("gamma__ask", {"question": "anyone?"})
        assert result.is_error is True and "sampling capability" in text_of(result)


async def test_rest_lists_reads_and_gets(system: System) -> None:
    servers = (await system.api.get("/api/v1/aggregator/servers")).json()["servers"]
    gamma = next(s["id"] for s in servers if s["name"] == "gamma")
    listed = (await system.api.get(f"/api/v1/aggregator/servers/{gamma}/resources")).json()
    assert {r["uri"] for r in listed["resources"]} == {"demo://readme", "demo://logo"}
    assert listed["resource_templates"][0]["uriTemplate"] == "demo://items/{item}"
    prompts = (await system.api.get(f"/api/v1/aggregator/servers/{gamma}/prompts")).json()
    assert [p["name"] for p in prompts["prompts"]] == ["greet"]
    read = await system.api.post("/api/v1/resources/read", json={"uri": "demo://readme", "server_id": gamma})
    assert read.status_code == 200 and read.json()["metadata"]["routed_to"] == "gamma"
    assert read.json()["contents"][0]["text"].startswith("# demo")
    got = await system.api.post("/api/v1/prompts/get", json={"name": "gamma.greet", "arguments": {"name": "Bo"}})
    assert got.status_code == 200 and "Bo" in str(got.json()["messages"])
    ambiguous = await system.api.post("/api/v1/prompts/get", json={"name": "greet", "arguments": {"name": "x"}})
    assert ambiguous.status_code == 400 and ambiguous.json()["error_code"] == "PROMPT_AMBIGUOUS"
    missing = await system.api.post("/api/v1/resources/read", json={"uri": "nothing://here"})
    assert missing.status_code == 404 and missing.json()["error_code"] == "RESOURCE_NOT_FOUND"


@pytest.mark.parametrize("path", ["/mcp", "/mcp/gamma"])
async def test_a_client_of_the_2026_07_28_protocol_works_too(system: System, path: str) -> None:
    url = f"http://{system.settings.host}:{system.settings.port}{path}"
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="auto") as client,
    ):
        assert client.session.protocol_version == "2026-07-28"
        echo = "echo" if path != "/mcp" else "gamma__echo"
        assert text_of(await client.call_tool(echo, {"text": "modern"})) == "modern"
        read = await client.read_resource("demo://items/9")
        assert (
            isinstance(read.contents[0], mcp_types.TextResourceContents) and read.contents[0].text == "item 9 of demo"
        )
        prompt = "greet" if path != "/mcp" else "gamma__greet"
        assert "Eve" in str((await client.get_prompt(prompt, {"name": "Eve"})).messages[0].content)


async def test_resource_subscriptions_are_counted_per_upstream_and_updates_reach_every_holder(system: System) -> None:
    first, second = Received(), Received()
    async with session_at(system, "/mcp", received=first) as one, session_at(system, "/mcp", received=second) as two:
        await one.subscribe_resource("demo://logo")  # alpha serves it (the collision rule)
        await two.subscribe_resource("demo://logo")
        counts = (await one.call_tool("alpha__stats", {})).structured_content
        assert counts is not None and (counts["subscribes"], counts["unsubscribes"]) == (1, 0)
        await one.call_tool("alpha__touch", {"uri": "demo://logo"})
        for received in (first, second):
            await eventually(_updated(received, "demo://logo"), timeout=10, what="an update")
        await one.unsubscribe_resource("demo://logo")
        counts = (await two.call_tool("alpha__stats", {})).structured_content
        assert counts is not None and counts["unsubscribes"] == 0  # the second holder keeps it
        await two.unsubscribe_resource("demo://logo")
        counts = (await two.call_tool("alpha__stats", {})).structured_content
        assert counts is not None and counts["unsubscribes"] == 1


def _updated(received: Received, uri: str) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return received.updated(uri) > 0

    return probe


async def test_a_servers_own_path_hears_when_its_tool_list_changes(system: System) -> None:
    received = Received()
    async with session_at(system, "/mcp/gamma", received=received) as session:
        await session.call_tool("add_tool", {"name": "fresh_tool"})

        async def announced() -> bool:
            return received.tools_changed() > 0

        await eventually(announced, timeout=15, what="tools/list_changed on /mcp/gamma")
        assert "fresh_tool" in {t.name for t in (await session.list_tools()).tools}


@pytest.mark.parametrize(("path", "tool"), [("/mcp", "gamma__ask"), ("/mcp", "alpha__ask"), ("/mcp/gamma", "ask")])
async def test_sampling_reaches_a_2026_07_28_client_as_an_input_request(system: System, path: str, tool: str) -> None:
    url = f"http://{system.settings.host}:{system.settings.port}{path}"
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="auto", sampling_callback=sample_by_echo) as client,
    ):
        assert client.session.protocol_version == "2026-07-28"
        result = await client.call_tool(tool, {"question": "modern?"})
    assert text_of(result) == "model said: echo of modern?", result


@pytest.mark.parametrize(("path", "tool"), [("/mcp", "gamma__add_tool"), ("/mcp/gamma", "add_tool")])
async def test_a_2026_07_28_client_listens_for_list_changes(system: System, path: str, tool: str) -> None:
    """``subscriptions/listen`` (the stateless era's stream of changes): acknowledged, then told when the
    tool list changes (before: ``/mcp/{name}`` answered -32601)."""
    url = f"http://{system.settings.host}:{system.settings.port}{path}"
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="auto") as client,
    ):
        assert client.session.protocol_version == "2026-07-28"
        async with client.listen(tools_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed is True
            await client.call_tool(tool, {"name": "listened_for"})
            with anyio.fail_after(20):
                event = await anext(aiter(subscription))
        assert isinstance(event, ToolsListChanged), event
        assert "listened_for" in str([t.name for t in (await client.list_tools()).tools])
