"""A hostile upstream that speaks only the 2026-07-28 era (``tests/peers/hostile_modern.py``) cannot
make toolmesh ask the wrong client, flood it with re-discoveries, or reach a client with a resource
update no one subscribed to; a key of another namespace subscribes to nothing through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import pytest
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_client import Received, mcp_session, session_at, text_of
from tests.mcp_raw import modern_call
from tests.peers.launch import free_port, running_process

pytestmark = pytest.mark.integration
HOSTILE = Path(__file__).parents[1] / "peers" / "hostile_modern.py"
ENDPOINT = "/mcp/hostile"


@dataclass
class Hostile:
    system: System
    port: int

    async def state(self) -> dict[str, Any]:
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.get(f"http://127.0.0.1:{self.port}/state")
        seen: dict[str, Any] = response.json()
        return seen


@pytest.fixture
async def hostile(nats_url: str, database_url: str) -> AsyncIterator[Hostile]:
    port = free_port()
    async with (
        running_system(nats_url, database_url) as running,
        running_process([sys.executable, str(HOSTILE), "--port", str(port)], port=port),
    ):
        config = {"base_url": f"http://127.0.0.1:{port}/mcp", "headers": {}}
        created = await running.register("hostile", "HTTP", config, allow_insecure=True, new_tools="auto")
        await running.wait_connected(created["id"])
        peer = Hostile(running, port)

        async def listening() -> bool:
            return bool((await peer.state())["listening"])

        await eventually(listening, what="the listen stream to open")
        yield peer


@contextlib.asynccontextmanager
async def answering(system: System, token: str, name: str, asked: list[str]) -> AsyncIterator[ClientSession]:
    """A handshake-era session at ``ENDPOINT`` that answers every elicitation with ``name`` (the
    questions in ``asked``)."""

    async def elicit(context: ClientRequestContext, params: mcp_types.ElicitRequestParams) -> Any:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"name": name})

    url = f"{system.api.base_url}{ENDPOINT}"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        await session.initialize()
        yield session


async def test_a_question_of_toolmeshs_own_request_goes_to_no_client(hostile: Hostile) -> None:
    """Re-discovery's ``tools/list`` (toolmesh's own request) is answered with an elicitation of a
    password: it is not put to the one client that has a call in flight."""
    asked: list[str] = []
    async with answering(hostile.system, ADMIN_TOKEN, "admin", asked) as holder:
        held = asyncio.ensure_future(holder.call_tool("hold", {}))
        try:

            async def holding() -> bool:
                return bool((await hostile.state())["holding"])

            await eventually(holding, what="the hold call to reach the upstream")
            async with httpx2.AsyncClient(timeout=10) as http:
                armed = await http.post(f"http://127.0.0.1:{hostile.port}/trap")
            assert armed.status_code == 200, armed.text
            async with session_at(hostile.system, "/mcp") as session:

                async def past_the_trap() -> bool:  # the pass after the trapped one (one at a time)
                    return "hostile__after_trap" in {tool.name for tool in (await session.list_tools()).tools}

                await eventually(past_the_trap, what="the re-discovery after the trapped one")
                assert text_of(await session.call_tool("hostile__release", {})) == "released"
            assert text_of(await held) == "held"
        finally:
            held.cancel()
    seen = await hostile.state()
    assert asked == [], asked
    assert (seen["trapped"], seen["answered_list"]) == (1, 0), seen


async def test_a_flood_of_list_changes_is_one_rediscovery_at_a_time(hostile: Hostile) -> None:
    before = (await hostile.state())["tools_list"]
    api = hostile.system.api
    for tool in ("hostile.flood", "hostile.mark"):
        called = await api.post("/api/v1/tools/call", json={"name": tool, "arguments": {}})
        assert called.status_code == 200, called.text

    async with session_at(hostile.system, "/mcp") as session:

        async def marked() -> bool:
            return "hostile__after_flood" in {tool.name for tool in (await session.list_tools()).tools}

        await eventually(marked, what="the tool added after the flood to be discovered")
    listed = (await hostile.state())["tools_list"] - before
    assert listed <= 6, f"{listed} tools/list for 301 list changes"


async def test_a_forged_resource_update_reaches_no_client(hostile: Hostile) -> None:
    received = Received()
    async with session_at(hostile.system, ENDPOINT, received=received) as session:
        await received.standalone_opened()
        await session.subscribe_resource("memo://mine")

        async def resubscribed() -> bool:
            listens = (await hostile.state())["listens"]
            return any("memo://mine" in (asked or {}).get("resourceSubscriptions", []) for asked in listens)

        await eventually(resubscribed, what="the listen stream to ask for memo://mine")
        assert text_of(await session.call_tool("forge", {})) == "forged"
        await eventually(lambda: received.updated("memo://mine"), what="the update of the subscribed resource")
    assert not received.updated("secret://unsubscribed")


async def test_callers_asked_at_the_same_time_each_get_their_own_question(hostile: Hostile) -> None:
    """Two principals' calls wait for their input at once: each question goes to its own caller."""
    ann_token = (await hostile.system.create_key("ann", "user"))["token"]
    asked: dict[str, list[str]] = {"admin": [], "ann": []}
    async with (
        answering(hostile.system, ADMIN_TOKEN, "admin", asked["admin"]) as admin,
        answering(hostile.system, ann_token, "ann", asked["ann"]) as ann,
    ):
        by_admin, by_ann = await asyncio.gather(
            admin.call_tool("ask", {"who": "admin"}), ann.call_tool("ask", {"who": "ann"})
        )
    assert (text_of(by_admin), text_of(by_ann)) == ("admin answered: admin", "ann answered: ann")
    assert asked == {"admin": ["question for admin"], "ann": ["question for ann"]}, asked


async def test_a_key_of_another_namespace_subscribes_to_nothing_upstream(hostile: Hostile) -> None:
    stranger = (await hostile.system.create_key("stranger", "user", namespace="team-b"))["token"]
    async with mcp_session(hostile.system, token=stranger) as session:
        with pytest.raises(MCPError):
            await session.subscribe_resource("memo://mine")
    with pytest.raises(ExceptionGroup) as refused:  # the endpoint of a server it cannot see is not there
        async with mcp_session(hostile.system, token=stranger, path=ENDPOINT) as session:
            await session.subscribe_resource("memo://mine")
    assert "Not Found" in repr(refused.value), refused.value

    async with session_at(hostile.system, ENDPOINT) as owner:
        await owner.subscribe_resource("memo://owner")

        async def asked_for(uri: str) -> bool:
            listens = (await hostile.state())["listens"]
            return any(uri in (asked or {}).get("resourceSubscriptions", []) for asked in listens)

        await eventually(lambda: asked_for("memo://owner"), what="the listen stream to ask for memo://owner")
        assert not await asked_for("memo://mine")


@pytest.mark.parametrize(
    "kind, rounds, questions, words",
    [
        ("endless", 11, 10, "asked for input more than 10 times"),
        ("many", 1, 0, "more than 16 input requests"),
        ("foreign", 1, 0, "cannot put to a client"),
        ("not-object", 1, 0, "cannot put to a client"),
        ("not-a-map", 1, 0, "not one"),
    ],
)
async def test_hostile_input_rounds_end_the_call(
    hostile: Hostile, kind: str, rounds: int, questions: int, words: str
) -> None:
    asked: list[str] = []
    async with answering(hostile.system, ADMIN_TOKEN, "admin", asked) as session:
        with pytest.raises(MCPError) as refused:
            await session.call_tool("rounds", {"kind": kind})
    assert words in refused.value.error.message, refused.value.error
    assert len(asked) == questions, asked
    assert (await hostile.state())["rounds"] == {kind: rounds}


async def test_a_wide_input_request_reaches_its_caller_whole(hostile: Hostile) -> None:
    """Parameters of thousands of keys are the upstream's business: its caller is asked, once a round."""
    asked: list[str] = []
    async with answering(hostile.system, ADMIN_TOKEN, "admin", asked) as session:
        with pytest.raises(MCPError) as refused:
            await session.call_tool("rounds", {"kind": "wide"})
    assert "more than 10 times" in refused.value.error.message, refused.value.error
    assert len(asked) == 10


async def test_a_listen_stream_that_ends_at_once_is_reopened_ever_more_slowly(hostile: Hostile) -> None:
    called = await hostile.system.api.post("/api/v1/tools/call", json={"name": "hostile.end_listens", "arguments": {}})
    assert called.status_code == 200, called.text

    async def three_ended() -> list[float] | None:
        ended: list[float] = (await hostile.state())["ended_listens"]
        return ended if len(ended) >= 3 else None

    ended = await eventually(three_ended, what="three listen streams ended at once")
    gaps = [later - earlier for earlier, later in itertools.pairwise(ended)]
    assert all(gap >= 1.5 for gap in gaps), gaps  # backing off from 1s: 2s, then 4s
    assert gaps[1] > gaps[0], gaps


async def test_a_listen_stream_that_ends_soon_after_it_opened_is_reopened_ever_more_slowly(hostile: Hostile) -> None:
    """A stream that lasts a little longer than the last pause does not reset the backoff: an upstream ending
    each stream after 2.5 s cannot make toolmesh reopen (and rediscover) every 3.5 s."""
    body = {"name": "hostile.end_listens", "arguments": {"after": 2.5}}
    called = await hostile.system.api.post("/api/v1/tools/call", json=body)
    assert called.status_code == 200, called.text

    async def three_opened() -> list[float] | None:
        opened: list[float] = (await hostile.state())["ended_listens"]
        return opened if len(opened) >= 3 else None

    opened = await eventually(three_opened, timeout=30, what="three short listen streams")
    gaps = [later - earlier for earlier, later in itertools.pairwise(opened)]
    assert gaps[1] > gaps[0] + 1.0, gaps  # 2.5 s open, then a pause of 2 s, then 4 s, ...


def logged(received: Received, text: str) -> int:
    """How many log messages saying ``text`` arrived."""
    kind = mcp_types.LoggingMessageNotification
    return sum(isinstance(m, kind) and m.params.data == text for m in received.messages)


async def test_a_log_message_on_a_calls_stream_goes_to_its_caller_only(hostile: Hostile) -> None:
    """Another principal with a call in flight and a log level set hears nothing of this call."""
    ann_token = (await hostile.system.create_key("ann", "user"))["token"]
    mine, theirs = Received(), Received()
    async with (
        mcp_session(hostile.system, token=ann_token, path=ENDPOINT, received=theirs) as ann,
        session_at(hostile.system, ENDPOINT, received=mine) as admin,
    ):
        await ann.set_logging_level("info")
        held = asyncio.ensure_future(ann.call_tool("hold", {}))
        try:

            async def holding() -> bool:
                return bool((await hostile.state())["holding"])

            await eventually(holding, what="the hold call to reach the upstream")
            assert text_of(await admin.call_tool("whisper", {"who": "admin"})) == "whispered"
            await eventually(lambda: logged(mine, "secret for admin"), what="the caller's own log message")
            assert text_of(await ann.call_tool("release", {})) == "released"
            assert text_of(await held) == "held"
            assert text_of(await ann.call_tool("whisper", {"who": "ann"})) == "whispered"
            await eventually(lambda: logged(theirs, "secret for ann"), what="ann's own log message")
        finally:
            held.cancel()
    assert not logged(theirs, "secret for admin"), theirs.messages


async def test_subscriptions_past_what_one_listen_stream_carries_are_refused(hostile: Hostile) -> None:
    """Every subscription reopens the listen stream asking for all of them: a key of the lowest role
    cannot make it ask for more than 256 KiB of URIs, however many it subscribes."""
    ann_token = (await hostile.system.create_key("ann", "user"))["token"]
    padding = "x" * 8000
    async with mcp_session(hostile.system, token=ann_token, path=ENDPOINT) as ann:
        with pytest.raises(MCPError) as refused:
            for n in range(64):
                await ann.subscribe_resource(f"memo://{n}/{padding}")
    assert refused.value.error.code == -32602 and "subscribed URIs" in refused.value.error.message, refused.value.error
    listens = (await hostile.state())["listens"]
    widest = max(sum(len(uri) for uri in (asked or {}).get("resourceSubscriptions", [])) for asked in listens)
    assert widest <= 256 * 1024, widest


@pytest.mark.parametrize(
    "kind, capabilities, words",
    [
        ("many", {"elicitation": {}}, "at most 16"),
        ("foreign", {"elicitation": {}}, "not sampling, elicitation or roots"),
        ("not-object", {"elicitation": {}}, "not sampling, elicitation or roots"),
        ("not-a-map", {"elicitation": {}}, "at most 16"),
        ("endless", {}, "which the request did not declare"),
    ],
)
async def test_a_modern_client_is_not_put_a_hostile_question(
    hostile: Hostile, kind: str, capabilities: dict[str, Any], words: str
) -> None:
    """A 2026-07-28 client gets the upstream's own ``InputRequiredResult`` only when its questions are
    of the era's kinds, few enough, and ones the request declared it can answer."""
    url = f"{hostile.system.api.base_url}{ENDPOINT}"
    params = {"name": "rounds", "arguments": {"kind": kind}}
    answer = await modern_call(url, "tools/call", params, token=ADMIN_TOKEN, capabilities=capabilities)
    assert answer.get("error", {}).get("code") == mcp_types.INTERNAL_ERROR, answer
    assert words in answer["error"]["message"], answer
    assert "result" not in answer


async def test_a_modern_client_that_declared_elicitation_is_asked(hostile: Hostile) -> None:
    """The control: the same upstream's well-formed question reaches a client that can answer it."""
    url = f"{hostile.system.api.base_url}{ENDPOINT}"
    params = {"name": "rounds", "arguments": {"kind": "endless"}}
    answer = await modern_call(url, "tools/call", params, token=ADMIN_TOKEN, capabilities={"elicitation": {}})
    assert answer["result"]["resultType"] == "input_required", answer
