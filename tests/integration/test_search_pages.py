"""``search_tools`` of ``/mcp?mode=search`` a page at a time, and by server, through a real gateway.

Team A has ``generated`` (the demo peer with 120 generated tools more) and ``jira``; team B has
``github``. Pages follow ``next_cursor`` through the best 100 matches, each once, in the order one
large page gives; grouped by server, each page names servers with their best tools. A cursor works
only for the search it was issued for: another query or grouping, another namespace, or an altered
cursor is refused on ``cursor``, and no page shows another namespace's tools.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from mcp.client.session import ClientSession

from tests.harness import System, eventually, running_system
from tests.mcp_client import mcp_session, text_of
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
GENERATED = "generated tool number"


@dataclass
class Teams:
    system: System
    tokens: dict[str, str]  # team-a, team-b


@pytest.fixture
async def teams(nats_url: str, database_url: str) -> AsyncIterator[Teams]:
    async with (
        running_system(nats_url, database_url) as system,
        launch_peer("stdio", tools=120) as wide,
        launch_peer("stdio") as plain,
    ):
        tokens = {
            team: (await system.create_key(f"admin-{team}", "admin", namespace=team))["token"]
            for team in ("team-a", "team-b")
        }
        registered = []
        for team, name, peer in (("team-a", "generated", wide), ("team-a", "jira", plain), ("team-b", "github", plain)):
            async with system.client_as(tokens[team]) as api:
                body = {"name": name, "transport_type": "STDIO", "connection_config": peer.config}
                response = await api.post("/api/v1/aggregator/servers", json=body)
                assert response.status_code == 201, response.text
                registered.append(response.json()["id"])
        for server_id in registered:
            await system.wait_connected(server_id)
        await eventually(lambda: settled(system, registered), timeout=120, what="every tool indexed and classified")
        yield Teams(system, tokens)


async def settled(system: System, server_ids: list[str]) -> bool:
    """True when every tool of the servers has its vector and its skills in the index (ranking holds still)."""
    total = 0
    for server_id in server_ids:
        tools = (await system.api.get(f"/api/v1/aggregator/servers/{server_id}/tools")).json()
        if tools["unclassified"] or not tools["total"]:
            return False
        total += tools["total"]
    health = (await system.api.get("/api/v1/search/health")).json()  # the owner's: every namespace
    return bool(health.get("tools_without_vector") == 0 and health.get("tools", 0) >= total)


async def search(session: ClientSession, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool("search_tools", arguments)
    assert result.is_error is False, text_of(result)
    body: dict[str, Any] = json.loads(text_of(result))
    return body


async def refusal(session: ClientSession, **arguments: Any) -> list[dict[str, Any]]:
    result = await session.call_tool("search_tools", arguments)
    assert result.is_error is True, text_of(result)
    body = json.loads(text_of(result))
    assert body["error_code"] == "VALIDATION_ERROR"
    errors: list[dict[str, Any]] = body["context"]["errors"]
    return errors


async def pages(session: ClientSession, query: str, limit: int) -> list[dict[str, Any]]:
    """Every page of ``query``, following ``next_cursor``."""
    answers = [await search(session, query=query, limit=limit)]
    while "next_cursor" in answers[-1]:
        answers.append(await search(session, query=query, limit=limit, cursor=answers[-1]["next_cursor"]))
    return answers


async def test_pages_follow_the_cursor_through_the_best_matches_once(teams: Teams) -> None:
    async with mcp_session(teams.system, token=teams.tokens["team-a"], mode="search") as session:

        async def paged_while_still() -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
            """One large page and every page of 30; None when the ranking moved meanwhile (the index
            applying a late classification)."""
            whole = await search(session, query=GENERATED, limit=100)
            answers = await pages(session, GENERATED, 30)
            return (whole, answers) if whole == await search(session, query=GENERATED, limit=100) else None

        whole, answers = await eventually(paged_while_still, what="a ranking that holds still")
        assert len(whole["tools"]) == 100 and "next_cursor" not in whole
        assert [len(p["tools"]) for p in answers] == [30, 30, 30, 10]
        paged = [t["name"] for p in answers for t in p["tools"]]
        assert paged == [t["name"] for t in whole["tools"]] and len(set(paged)) == 100
        assert {t["server"] for t in whole["tools"]} <= {"generated", "jira"}
        assert all(t["input_schema"] is not None for t in answers[2]["tools"])


async def test_grouped_by_server_a_page_names_servers_with_their_best_tools(teams: Teams) -> None:
    async with mcp_session(teams.system, token=teams.tokens["team-a"], mode="search") as session:
        first = await search(session, query="echo the text", group_by="server", limit=1, tools_per_server=2)
        second = await search(
            session, query="echo the text", group_by="server", limit=1, tools_per_server=2, cursor=first["next_cursor"]
        )
        assert "next_cursor" not in second and "tools" not in first
        servers = first["servers"] + second["servers"]
        assert sorted(s["server"] for s in servers) == ["generated", "jira"]
        assert servers[0]["score"] >= servers[1]["score"]
        listed = {s["server"]: s for s in servers}
        assert listed["generated"]["tool_count"] == listed["jira"]["tool_count"] + 120
        for entry in servers:
            assert len(entry["tools"]) == min(2, entry["matching_tools"])
            assert all(t["name"].startswith(f"{entry['server']}.") and "input_schema" not in t for t in entry["tools"])
            assert entry["tools"][0]["score"] == entry["score"]
        assert f"{listed['jira']['server']}.echo" in [t["name"] for t in listed["jira"]["tools"]]


async def test_a_cursor_is_refused_outside_its_search_and_namespace(teams: Teams) -> None:
    async with mcp_session(teams.system, token=teams.tokens["team-a"], mode="search") as a:
        cursor = (await search(a, query=GENERATED, limit=10))["next_cursor"]
        raw = bytearray(base64.urlsafe_b64decode(cursor + "=="))
        raw[1] = 95  # the last page's offset, under the first page's MAC
        altered = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
        for arguments in (
            {"query": "echo the text", "cursor": cursor},
            {"query": GENERATED, "group_by": "server", "cursor": cursor},
            {"query": GENERATED, "server_filter": ["jira"], "cursor": cursor},
            {"query": GENERATED, "cursor": altered},
            {"query": GENERATED, "cursor": 10},
        ):
            assert [e["loc"] for e in await refusal(a, **arguments)] == [["cursor"]], arguments
        assert len((await search(a, query=GENERATED, limit=10, cursor=cursor))["tools"]) == 10
    async with mcp_session(teams.system, token=teams.tokens["team-b"], mode="search") as b:
        assert [e["loc"] for e in await refusal(b, query=GENERATED, limit=10, cursor=cursor)] == [["cursor"]]
        own = await search(b, query=GENERATED, group_by="server", limit=100)
        assert [s["server"] for s in own["servers"]] == ["github"] and "next_cursor" not in own
