"""Keys, roles and namespaces against real NATS, Postgres and MCP peers, by REST and by ``/mcp``.

Team A and team B each register a server called ``github``; team A also has ``jira``. Whatever
team B tries with team A's servers — list, read, search, call by name or id, refresh, connect,
disconnect, delete — answers as if they did not exist (404); a user key may not register or
delete (403).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.harness import RoleProcess, System, eventually, running_system
from tests.mcp_client import mcp_session, text_of
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT
from tests.peers.launch import launch_peer
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.integration
REVOCATION_BOUND_SECONDS = 1.0
"""The issue's bound: a revoked key is refused by every gateway within a second (no cache window)."""


@dataclass
class Tenants:
    system: System
    tokens: dict[str, str]  # admin-a, user-a, admin-b
    ids: dict[str, str]  # a/github, a/jira, b/github

    def client(self, who: str) -> httpx.AsyncClient:
        return self.system.client_as(self.tokens[who])


async def register_as(api: httpx.AsyncClient, name: str, config: dict[str, Any]) -> dict[str, Any]:
    body = {"name": name, "transport_type": "STDIO", "connection_config": config}
    response = await api.post("/api/v1/aggregator/servers", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


@pytest.fixture
async def tenants(nats_url: str, database_url: str) -> AsyncIterator[Tenants]:
    async with running_system(nats_url, database_url) as system, launch_peer("stdio") as peer:
        tokens = {
            "admin-a": (await system.create_key("admin-a", "admin", namespace="team-a"))["token"],
            "user-a": (await system.create_key("user-a", "user", namespace="team-a"))["token"],
            "admin-b": (await system.create_key("admin-b", "admin", namespace="team-b"))["token"],
        }
        found = Tenants(system, tokens, {})
        async with found.client("admin-a") as a, found.client("admin-b") as b:
            found.ids["a/github"] = (await register_as(a, "github", peer.config))["id"]
            found.ids["a/jira"] = (await register_as(a, "jira", peer.config))["id"]
            found.ids["b/github"] = (await register_as(b, "github", peer.config))["id"]
        for server_id in found.ids.values():
            await system.wait_connected(server_id)
        yield found


async def test_the_same_name_lives_in_two_namespaces(tenants: Tenants) -> None:
    listed = (await tenants.system.api.get("/api/v1/aggregator/servers")).json()["servers"]
    assert sorted((s["name"], s["namespace"]) for s in listed) == [
        ("github", "team-a"),
        ("github", "team-b"),
        ("jira", "team-a"),
    ]
    async with tenants.client("admin-b") as b:
        again = await b.post(
            "/api/v1/aggregator/servers",
            json={"name": "github", "transport_type": "STDIO", "connection_config": {"command": "true"}},
        )
        assert again.status_code == 409 and again.json()["error_code"] == "SERVER_ALREADY_EXISTS"
        mine = (await b.get("/api/v1/aggregator/servers")).json()
        assert [(s["name"], s["namespace"]) for s in mine["servers"]] == [("github", "team-b")] and mine["total"] == 1


async def test_another_tenants_servers_answer_not_found_over_rest(tenants: Tenants) -> None:
    a_github, a_jira = tenants.ids["a/github"], tenants.ids["a/jira"]
    async with tenants.client("admin-b") as b:
        for method, path, body in (
            ("GET", f"/api/v1/aggregator/servers/{a_github}", None),
            ("GET", f"/api/v1/aggregator/servers/{a_github}/tools", None),
            ("GET", f"/api/v1/aggregator/servers/{a_github}/history", None),
            ("POST", f"/api/v1/aggregator/servers/{a_github}/tools/refresh", None),
            ("POST", f"/api/v1/aggregator/servers/{a_github}/tools/approve", None),
            ("POST", f"/api/v1/aggregator/servers/{a_github}/connect", None),
            ("POST", f"/api/v1/aggregator/servers/{a_github}/disconnect", {"force": True}),
            ("DELETE", f"/api/v1/aggregator/servers/{a_jira}", None),
        ):
            response = await b.request(method, path, json=body)
            assert response.status_code == 404, (method, path, response.text)
            assert response.json()["error_code"] == "SERVER_NOT_FOUND"
        by_id = await b.post("/api/v1/tools/call", json={"name": "echo", "server_id": a_github, "arguments": {}})
        assert by_id.status_code == 404 and by_id.json()["error_code"] == "SERVER_NOT_FOUND"
        by_name = await b.post("/api/v1/tools/call", json={"name": "jira.echo", "arguments": {"text": "x"}})
        assert by_name.status_code == 404 and by_name.json()["error_code"] == "TOOL_NOT_FOUND"
        own = await b.post("/api/v1/tools/call", json={"name": "github.echo", "arguments": {"text": "mine"}})
        assert own.status_code == 200 and own.json()["metadata"]["server_id"] == tenants.ids["b/github"]

        async def found_by_search() -> set[str]:
            found = (await b.post("/api/v1/search", json={"query": "echo text", "limit": 50})).json()["tools"]
            return {t["source_server"]["id"] for t in found}

        assert await eventually(found_by_search, timeout=20, what="search results") == {tenants.ids["b/github"]}
        other = await b.post("/api/v1/search", json={"query": "echo", "namespace": "team-a"})
        assert other.status_code == 200 and other.json()["tools"] == []
        state = (await b.get("/api/v1/aggregator/state")).json()
        assert state["total_servers"] == 1
    # Nothing of team A moved.
    for server_id in (a_github, a_jira):
        assert (await tenants.system.server(server_id))["status"] == "CONNECTED"


async def test_a_user_key_lists_searches_and_calls_but_may_not_manage(tenants: Tenants) -> None:
    async with tenants.client("user-a") as user:
        denied = await user.post(
            "/api/v1/aggregator/servers",
            json={"name": "mine", "transport_type": "STDIO", "connection_config": {"command": "true"}},
        )
        assert denied.status_code == 403 and denied.json()["error_code"] == "FORBIDDEN"
        delete = await user.delete(f"/api/v1/aggregator/servers/{tenants.ids['a/jira']}")
        assert delete.status_code == 403 and delete.json()["error_code"] == "FORBIDDEN"
        elsewhere = await user.delete(f"/api/v1/aggregator/servers/{tenants.ids['b/github']}")
        assert elsewhere.status_code == 404
        keys = await user.post("/api/v1/auth/keys", json={"name": "sneaky", "role": "admin"})
        assert keys.status_code == 403
        assert (await user.get("/api/v1/audit")).status_code == 403
        listed = (await user.get("/api/v1/aggregator/servers")).json()
        assert sorted(s["name"] for s in listed["servers"]) == ["github", "jira"]
        called = await user.post("/api/v1/tools/call", json={"name": "jira.echo", "arguments": {"text": "ok"}})
        assert called.status_code == 200 and called.json()["content"][0]["text"] == "ok"


async def test_an_admin_manages_keys_only_inside_its_namespace(tenants: Tenants) -> None:
    async with tenants.client("admin-a") as a:
        owner = await a.post("/api/v1/auth/keys", json={"name": "boss", "role": "owner"})
        assert owner.status_code == 403
        foreign = await a.post("/api/v1/auth/keys", json={"name": "spy", "role": "user", "namespace": "team-b"})
        assert foreign.status_code == 403
        created = await a.post("/api/v1/auth/keys", json={"name": "bot", "role": "user"})
        assert created.status_code == 201 and created.json()["namespace"] == "team-a"
        listed = (await a.get("/api/v1/auth/keys")).json()["keys"]
        assert {k["name"] for k in listed} == {"admin-a", "user-a", "bot"}
        assert all("token" not in k for k in listed)
        b_key = next(
            k for k in (await tenants.system.api.get("/api/v1/auth/keys")).json()["keys"] if k["name"] == "admin-b"
        )
        assert (await a.delete(f"/api/v1/auth/keys/{b_key['id']}")).status_code == 404
        admin_key = next(
            k for k in (await tenants.system.api.get("/api/v1/auth/keys")).json()["keys"] if k["role"] == "owner"
        )
        assert (await a.delete(f"/api/v1/auth/keys/{admin_key['id']}")).status_code == 404


async def test_another_tenants_tools_are_invisible_through_mcp(tenants: Tenants) -> None:
    async with mcp_session(tenants.system, token=tenants.tokens["admin-b"]) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert "github__echo" in names and not any(n.startswith("jira__") for n in names)
        result = await session.call_tool("jira__echo", {"text": "x"})
        assert result.is_error is True and "TOOL_NOT_FOUND" in text_of(result)
        mine = await session.call_tool("github__echo", {"text": "hello"})
        assert mine.is_error is False and mine.meta is not None
        assert mine.meta["toolmesh/metadata"]["server_id"] == tenants.ids["b/github"]
    async with mcp_session(tenants.system, token=tenants.tokens["admin-b"], mode="search") as session:

        async def found_by_search() -> set[str]:  # the indexer may still be indexing the fixture's servers
            found = await session.call_tool("search_tools", {"query": "echo the text", "limit": 50})
            return {t["server"] for t in json.loads(text_of(found))["tools"]}

        assert await eventually(found_by_search, timeout=20, what="search results") == {"github"}
        call = await session.call_tool("call_tool", {"name": "jira.echo", "arguments": {"text": "x"}})
        assert call.is_error is True and "TOOL_NOT_FOUND" in text_of(call)
        listed = await session.call_tool("run", {"code": "proxy.list_servers()"})
        assert [s["name"] for s in json.loads(text_of(listed))["result"]] == ["github"]
        packs = await session.call_tool("run", {"code": "jira.echo(text='x')"})
        assert "NameError" in json.loads(text_of(packs))["error"]


async def test_an_mcp_session_for_another_namespace_is_not_found(tenants: Tenants) -> None:
    base = str(tenants.system.api.base_url)
    headers = {"Authorization": f"Bearer {tenants.tokens['admin-b']}", **MCP_ACCEPT}
    async with httpx.AsyncClient(base_url=base, headers=headers) as client:
        response = await client.post("/mcp?namespace=team-a", json=INITIALIZE)
    assert response.status_code == 404 and response.json()["error_code"] == "NAMESPACE_NOT_FOUND"


async def test_the_owner_opens_an_mcp_session_in_a_named_namespace(tenants: Tenants) -> None:
    async with mcp_session(tenants.system) as session:  # the owner's own namespace: nothing there
        assert (await session.list_tools()).tools == []
    async with mcp_session(tenants.system, namespace="team-a") as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"github__echo", "jira__echo"} <= names
        result = await session.call_tool("jira__echo", {"text": "owner"})
        assert result.is_error is False and text_of(result) == "owner"


async def test_a_revoked_key_is_refused_at_once_by_a_second_gateway(tenants: Tenants) -> None:
    system = tenants.system
    key = await system.create_key("short-lived", "user", namespace="team-a")
    settings = system.settings.model_copy(update={"port": free_port()})
    other = RoleProcess("gateway", settings)
    try:
        headers = {"Authorization": f"Bearer {key['token']}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.port}", headers=headers) as second:

            async def answers() -> bool:
                try:
                    return (await second.get("/api/v1/aggregator/servers")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(answers, timeout=60, what="the second gateway to accept the key")
            revoked = await system.api.delete(f"/api/v1/auth/keys/{key['id']}")
            assert revoked.status_code == 204

            async def refused() -> bool:
                return (await second.get("/api/v1/aggregator/servers")).status_code == 401

            await eventually(refused, timeout=REVOCATION_BOUND_SECONDS, what="the second gateway to refuse the key")
            first = await system.api.get("/api/v1/aggregator/servers", headers=headers)
            assert first.status_code == 401
    finally:
        other.terminate()


async def test_the_audit_log_is_per_namespace_and_records_tool_calls(tenants: Tenants) -> None:
    async with tenants.client("admin-a") as a, tenants.client("admin-b") as b:
        called = await a.post("/api/v1/tools/call", json={"name": "jira.echo", "arguments": {"text": "audit me"}})
        assert called.status_code == 200

        async def recorded_call() -> list[dict[str, Any]]:
            page = (await a.get("/api/v1/audit", params={"event": "tool.called"})).json()
            return list(page["entries"])

        calls = await eventually(recorded_call, timeout=15, what="the tool call in the audit log")
        assert calls[0]["server_name"] == "jira" and calls[0]["actor"] == "admin-a"
        assert calls[0]["details"]["tool"] == "echo" and calls[0]["details"]["outcome"] == "ok"
        assert "audit me" not in json.dumps(calls)  # arguments are never recorded
        mine = (await a.get("/api/v1/audit", params={"limit": 1000})).json()
        assert {e["namespace"] for e in mine["entries"]} == {"team-a"}
        assert {"server.registered", "tool.called"} <= {e["event"] for e in mine["entries"]}
        registered = [e for e in mine["entries"] if e["event"] == "server.registered"]
        assert {e["actor"] for e in registered} == {"admin-a"} and all(e["ip_address"] for e in registered)
        peek = (await b.get("/api/v1/audit", params={"namespace": "team-a"})).json()
        assert peek["entries"] == [] and peek["total"] == 0
    everything = (await tenants.system.api.get("/api/v1/audit", params={"limit": 1000})).json()
    assert {"team-a", "team-b"} <= {e["namespace"] for e in everything["entries"]}
    assert any(e["event"] == "key.created" for e in everything["entries"])
