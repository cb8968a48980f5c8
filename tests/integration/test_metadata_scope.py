"""What a key learns about the rest of the deployment: nothing beyond its namespace and its endpoints.

``/metrics`` (it names every namespace's servers) is for the owner and the metrics token only; the
search health a namespace's key reads counts its namespace; a search hit's id is the row of the
caller's own tool, never of another namespace's tool of the same name; a key limited to an endpoint
reads no prompt, search hit, server or pack outside its bundle, whatever name it asks by.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_client import mcp_session, text_of
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
METRICS_TOKEN = "scrape-token"


@dataclass
class Deployment:
    system: System
    tokens: dict[str, str]  # admin-b, user-b, agent-b, narrow (default namespace, limited to /mcp/narrow)
    ids: dict[str, str]  # alpha, beta (default namespace), b/alpha (team-b)

    def client(self, who: str) -> httpx.AsyncClient:
        token = self.tokens.get(who, who)
        return self.system.client_as(token)


async def new_key(system: System, name: str, role: str, **fields: object) -> str:
    return str((await system.create_key(name, role, **fields))["token"])


@pytest.fixture
async def deployment(nats_url: str, database_url: str) -> AsyncIterator[Deployment]:
    async with (
        running_system(nats_url, database_url, metrics_token=METRICS_TOKEN) as system,
        launch_peer("stdio") as peer,
    ):
        tokens = {
            "admin-b": await new_key(system, name="admin-b", role="admin", namespace="team-b"),
            "user-b": await new_key(system, name="user-b", role="user", namespace="team-b"),
            "agent-b": await new_key(system, name="agent-b", role="agent", namespace="team-b"),
        }
        ids = {name: (await system.register(name, "STDIO", peer.config))["id"] for name in ("alpha", "beta")}
        found = Deployment(system, tokens, ids)
        async with found.client("admin-b") as b:
            created = await b.post(
                "/api/v1/aggregator/servers",
                json={"name": "alpha", "transport_type": "STDIO", "connection_config": peer.config},
            )
            assert created.status_code == 201, created.text
            ids["b/alpha"] = created.json()["id"]
        for server_id in ids.values():
            await system.wait_connected(server_id)
        endpoint = {"name": "narrow", "include": ["alpha.add", "alpha.echo"]}  # no prompt, nothing of beta
        assert (await system.api.post("/api/v1/endpoints", json=endpoint)).status_code == 201
        tokens["narrow"] = await new_key(system, name="narrow", role="user", endpoints=["narrow"])
        yield found


async def test_metrics_need_the_owner_or_the_metrics_token(deployment: Deployment) -> None:
    for who, status in (("", 401), ("wrong", 401), ("user-b", 403), ("agent-b", 403), ("admin-b", 403)):
        async with deployment.client(who) as client:
            response = await client.get("/metrics", headers={"Authorization": ""} if not who else None)
            assert response.status_code == status, (who, response.text)
            assert "team-b" not in response.text and "alpha" not in response.text
            assert response.json()["error_code"] == ("UNAUTHORIZED" if status == 401 else "FORBIDDEN")
    for token in (ADMIN_TOKEN, METRICS_TOKEN):
        async with deployment.client(token) as client:
            scraped = await client.get("/metrics")
            assert scraped.status_code == 200 and "mcp_aggregator_servers_total" in scraped.text


async def test_search_health_counts_the_callers_namespace_only(deployment: Deployment) -> None:
    async def tools_of(who: str) -> int:
        async with deployment.client(who) as client:
            health = (await client.get("/api/v1/search/health")).json()
        return int(health["tools"]) if health.get("tools_without_vector") == 0 else 0

    demo_tools = (await deployment.system.server(deployment.ids["b/alpha"]))["tool_count"]
    assert await eventually(lambda: tools_of(ADMIN_TOKEN), what="the owner's count") == 3 * demo_tools
    for who in ("user-b", "admin-b"):
        assert await tools_of(who) == demo_tools, who
        async with deployment.client(who) as client:
            health = (await client.get("/api/v1/search/health")).json()
        assert not {"last_applied_seq", "stream_last_seq", "events_behind"} & health.keys(), health
    async with deployment.client(ADMIN_TOKEN) as owner:
        assert "last_applied_seq" in (await owner.get("/api/v1/search/health")).json()
        assert (await owner.get("/api/v1/aggregator/state")).json()["total_servers"] == 3
    async with deployment.client("user-b") as user:  # the aggregator's counts are the namespace's too
        state = (await user.get("/api/v1/aggregator/state")).json()
        assert (state["total_servers"], state["total_tools"]) == (1, demo_tools)
        assert (await user.get("/api/v1/aggregator/health")).json()["servers"]["total"] == 1


async def test_a_search_hit_id_is_the_row_of_the_callers_own_tool(deployment: Deployment) -> None:
    rows = await deployment.system.backends.db.fetch(
        "SELECT id, source_server_id::text AS server_id FROM mcp.tools WHERE name = 'alpha.echo'"
    )
    row_of = {r["server_id"]: int(r["id"]) for r in rows}
    assert len(row_of) == 2  # the same namespaced name in two namespaces

    async def hit(who: str) -> dict[str, object] | None:
        async with deployment.client(who) as client:
            found = (await client.post("/api/v1/search", json={"query": "echo text back", "limit": 50})).json()
        return next((t for t in found["tools"] if t["name"] == "alpha.echo"), None)

    mine = await eventually(lambda: hit("user-b"), what="team-b's alpha.echo in search")
    assert mine["source_server"]["id"] == deployment.ids["b/alpha"]  # type: ignore[index]
    assert mine["db_id"] == row_of[deployment.ids["b/alpha"]] and mine["id"] == str(mine["db_id"])
    owners = await eventually(lambda: hit(ADMIN_TOKEN), what="alpha.echo in the owner's search")
    assert owners["db_id"] == row_of[owners["source_server"]["id"]]  # type: ignore[index]


async def test_a_key_limited_to_an_endpoint_reads_no_prompt_outside_its_bundle(deployment: Deployment) -> None:
    async with mcp_session(deployment.system, path="/mcp/narrow", token=deployment.tokens["narrow"]) as session:
        assert (await session.list_prompts()).prompts == []
        for name in ("alpha.greet", "alpha__greet", "greet", "beta.greet"):
            with pytest.raises(MCPError) as refused:
                await session.get_prompt(name, {"name": "x"})
            assert "not found" in str(refused.value).lower(), (name, refused.value)


async def test_a_key_limited_to_an_endpoint_searches_and_runs_code_within_its_bundle(deployment: Deployment) -> None:
    narrow = deployment.tokens["narrow"]
    async with mcp_session(deployment.system, path="/mcp/narrow", token=narrow, mode="search") as session:

        async def found() -> set[str] | None:
            result = await session.call_tool("search_tools", {"query": "add two numbers", "limit": 20})
            names = {t["name"] for t in json.loads(text_of(result))["tools"]}
            return names if "alpha.add" in names else None

        assert await eventually(found, what="alpha.add in the bundle's search") <= {"alpha.add", "alpha.echo"}
        grouped = await session.call_tool("search_tools", {"query": "add two numbers", "group_by": "server"})
        [server] = json.loads(text_of(grouped))["servers"]  # its tool count is the bundle's, not the server's
        assert (server["server"], server["tool_count"]) == ("alpha", 2) and server["matching_tools"] <= 2
        listed = await session.call_tool("run", {"code": "proxy.list_servers()"})
        assert [s["name"] for s in json.loads(text_of(listed))["result"]] == ["alpha"]
        searched = await session.call_tool("run", {"code": "toolmesh.search('add two numbers', limit=20)"})
        assert {h["name"] for h in json.loads(text_of(searched))["result"]} <= {"alpha.add", "alpha.echo"}
        for code in ("beta.add(a=1, b=2)", "proxy.list_tools(server='beta')", "alpha.greet(name='x')"):
            outside = json.loads(text_of(await session.call_tool("run", {"code": code})))
            assert outside["ok"] is False and "result" not in outside, (code, outside)
        inside = json.loads(text_of(await session.call_tool("run", {"code": "alpha.add(a=1, b=2)"})))
        assert inside["result"] == {"result": 3.0}, inside


async def test_metrics_without_a_metrics_token_configured_are_still_not_public(
    nats_url: str, database_url: str
) -> None:
    async with running_system(nats_url, database_url, roles=["gateway"]) as system:
        anonymous = await system.api.get("/metrics", headers={"Authorization": ""})
        assert anonymous.status_code == 401 and anonymous.json()["error_code"] == "UNAUTHORIZED"
        assert "mcp_aggregator" not in anonymous.text
        assert (await system.api.get("/metrics")).status_code == 200  # the owner's key
