"""Ownership of servers: agents register servers and manage only their own; everything else of
another agent, or of another namespace, answers 404 (not found, never forbidden).

Team A has two agents (``agent-1``, ``agent-2``), an admin and a user; team B one agent
(``agent-3``). The servers are REST tool servers (one peer process serves them all).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.harness import System, running_system
from tests.peers.launch import launch_rest_peer

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
KEYS = {
    "agent-1": ("agent", "team-a"),
    "agent-2": ("agent", "team-a"),
    "admin-a": ("admin", "team-a"),
    "user-a": ("user", "team-a"),
    "agent-3": ("agent", "team-b"),
}


@dataclass
class Team:
    system: System
    url: str
    tokens: dict[str, str]

    def client(self, who: str) -> httpx.AsyncClient:
        return self.system.client_as(self.tokens[who])

    async def register(self, who: str, name: str) -> dict[str, Any]:
        async with self.client(who) as api:
            body = {"name": name, "transport_type": "REST", "connection_config": {"url": self.url}}
            response = await api.post(SERVERS, json=body)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created


@pytest.fixture
async def team(nats_url: str, database_url: str) -> AsyncIterator[Team]:
    roles = ["gateway", "session-worker", "projector"]
    async with (
        # The peer listens on loopback: the deployment opens it to agents (loopback and private
        # targets are otherwise for owners and admins).
        running_system(
            nats_url,
            database_url,
            roles=roles,
            rest_retry_backoff_seconds=0.05,
            upstream_private_networks=("127.0.0.0/8",),
        ) as system,
        launch_rest_peer() as url,
    ):
        tokens = {}
        for name, (role, namespace) in KEYS.items():
            tokens[name] = (await system.create_key(name, role, namespace=namespace))["token"]
        yield Team(system, url, tokens)


async def management_answers(api: httpx.AsyncClient, server_id: str) -> dict[str, int]:
    """Status codes of every managing action on one server, the destructive one last."""
    answers = {
        "connect": (await api.post(f"{SERVERS}/{server_id}/connect")).status_code,
        "disconnect": (await api.post(f"{SERVERS}/{server_id}/disconnect")).status_code,
        "refresh": (await api.post(f"{SERVERS}/{server_id}/tools/refresh")).status_code,
        "approve": (await api.post(f"{SERVERS}/{server_id}/tools/approve")).status_code,
    }
    answers["delete"] = (await api.delete(f"{SERVERS}/{server_id}")).status_code
    return answers


async def test_agents_own_what_they_register_and_list_it_newest_first(team: Team) -> None:
    first = await team.register("agent-1", "first")
    theirs = await team.register("agent-2", "theirs")
    second = await team.register("agent-1", "second")
    for created in (first, theirs, second):
        await team.system.wait_connected(created["id"])

    async with team.client("agent-2") as api:
        listed = (await api.get(SERVERS, params={"agent": "agent-1"})).json()
        assert [s["name"] for s in listed["servers"]] == ["second", "first"]  # newest first
        assert listed["total"] == 2 and {s["created_by"] for s in listed["servers"]} == {"agent-1"}
        # Reading and calling stay namespace-wide: agent-2 sees agent-1's server ...
        assert (await api.get(f"{SERVERS}/{first['id']}")).json()["created_by"] == "agent-1"
        # ... but to manage it, it is not there.
        answers = await management_answers(api, first["id"])
        assert answers == dict.fromkeys(answers, 404), answers
        body = (await api.delete(f"{SERVERS}/{first['id']}")).json()
        assert body["error_code"] == "SERVER_NOT_FOUND"

    async with team.client("agent-1") as api:
        assert (await api.post(f"{SERVERS}/{first['id']}/disconnect")).json()["status"] == "DISCONNECTED"
        assert (await api.post(f"{SERVERS}/{first['id']}/connect")).status_code == 200
        await team.system.wait_connected(first["id"])
        assert (await api.post(f"{SERVERS}/{first['id']}/tools/refresh")).status_code == 202
        refused = await api.post(f"{SERVERS}/{first['id']}/tools/approve")  # approvals stay with admins
        assert refused.status_code == 403 and refused.json()["error_code"] == "FORBIDDEN"
        assert (await api.delete(f"{SERVERS}/{first['id']}")).status_code == 204
        assert (await api.get(SERVERS, params={"agent": "agent-1"})).json()["total"] == 1


async def test_admins_manage_every_server_of_their_namespace_and_users_may_not(team: Team) -> None:
    created = await team.register("agent-2", "tooling")
    await team.system.wait_connected(created["id"])
    async with team.client("user-a") as api:
        body = {"name": "mine", "transport_type": "REST", "connection_config": {"url": team.url}}
        assert (await api.post(SERVERS, json=body)).status_code == 403
        assert (await api.delete(f"{SERVERS}/{created['id']}")).status_code == 403
        assert (await api.post(f"{SERVERS}/{created['id']}/disconnect")).status_code == 403
    async with team.client("admin-a") as api:
        assert (await api.post(f"{SERVERS}/{created['id']}/disconnect")).status_code == 200
        assert (await api.delete(f"{SERVERS}/{created['id']}")).status_code == 204


async def test_another_namespace_is_not_found_for_agents(team: Team) -> None:
    created = await team.register("agent-1", "private")
    await team.system.wait_connected(created["id"])
    async with team.client("agent-3") as api:
        assert (await api.get(f"{SERVERS}/{created['id']}")).status_code == 404
        answers = await management_answers(api, created["id"])
        assert answers == dict.fromkeys(answers, 404), answers
        assert (await api.get(SERVERS, params={"agent": "agent-1"})).json()["servers"] == []
        # agent-3 may register the same name in its own namespace, and owns that one.
        body = {"name": "private", "transport_type": "REST", "connection_config": {"url": team.url}}
        mine = await api.post(SERVERS, json=body)
        assert mine.status_code == 201 and mine.json()["namespace"] == "team-b"
        elsewhere = {**body, "name": "elsewhere", "namespace": "team-a"}
        assert (await api.post(SERVERS, json=elsewhere)).status_code == 403  # only the owner picks a namespace
    async with team.client("agent-1") as api:
        assert (await api.delete(f"{SERVERS}/{mine.json()['id']}")).status_code == 404
    assert (await team.system.server(created["id"]))["status"] == "CONNECTED"
