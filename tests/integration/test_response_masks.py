"""Every response masks URL user-info and ``health_check_url`` credentials, for every role.

Attack (issue 23, "Medium"): a ``user`` key read a server's ``health_check_url`` with its
credentials, and the user-info of its URL (a token written as the user name). Now the detail
(REST and NATS API) and the event stream show ``***@`` for every key: owner, admin, agent, user.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import nats
import pytest

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
URL_TOKEN = f"ghp{uuid.uuid4().hex}"
HEALTH_USER, HEALTH_PASSWORD = "probe", f"hc-{uuid.uuid4().hex}"
ROLES = ("owner", "admin", "agent", "user")


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url, roles=["gateway", "projector", "session-worker"]) as system:
        yield system


async def _tokens(system: System) -> dict[str, str]:
    tokens = {"owner": ADMIN_TOKEN}
    for role in ROLES[1:]:
        created = await system.create_key(f"{role}-{uuid.uuid4().hex[:6]}", role, namespace="team-a")
        tokens[role] = created["token"]
    return tokens


async def _events(system: System, token: str, into: list[str]) -> None:
    """Read the key's event stream into ``into`` (one SSE data line each) until cancelled."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(base_url=str(system.api.base_url), headers=headers, timeout=None) as api,
        api.stream("GET", "/api/v1/events") as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                into.append(line)


def _leaks(text: str) -> list[str]:
    return [secret for secret in (URL_TOKEN, HEALTH_PASSWORD, HEALTH_USER) if secret in text]


async def test_url_user_info_and_health_check_credentials_are_masked_for_every_role(system: System) -> None:
    tokens = await _tokens(system)
    streams: dict[str, list[str]] = {role: [] for role in ROLES}
    readers = [asyncio.create_task(_events(system, tokens[role], streams[role])) for role in ROLES]
    try:
        await eventually(lambda: all(streams.values()), what="every stream to be ready")
        async with launch_peer("http") as peer:
            host = peer.url.removeprefix("http://")
            body: dict[str, Any] = {
                "name": f"masked-{uuid.uuid4().hex[:6]}",
                "transport_type": "HTTP",
                "connection_config": {"base_url": f"http://{URL_TOKEN}@{host}"},
                "health_check_url": f"http://{HEALTH_USER}:{HEALTH_PASSWORD}@{host.split('/')[0]}/health",
                "namespace": "team-a",
                "allow_insecure": True,
            }
            created = await system.api.post(SERVERS, json=body)
            assert created.status_code == 201, created.text
            server_id = created.json()["id"]
            assert not _leaks(created.text), "the 201 body"
            await eventually(
                lambda: all(any(server_id in line for line in lines) for lines in streams.values()),
                what="every stream to hear of the registration",
            )
            nc = await nats.connect(system.settings.nats_url or "", connect_timeout=10)
            try:
                for role in ROLES:
                    headers = {"Authorization": f"Bearer {tokens[role]}"}
                    async with httpx.AsyncClient(base_url=str(system.api.base_url), headers=headers) as api:
                        detail = await api.get(f"{SERVERS}/{server_id}")
                    assert detail.status_code == 200, detail.text
                    assert detail.json()["health_check_url"].startswith("http://***@")
                    assert detail.json()["connection_config"]["base_url"].startswith("http://***@")
                    assert not _leaks(detail.text), f"GET /servers/{{id}} as {role}"
                    assert not _leaks("\n".join(streams[role])), f"the event stream of {role}"
                    reply = await nc.request(
                        "toolmesh.api.v1.servers.get",
                        json.dumps({"server_id": server_id}).encode(),
                        timeout=30,
                        headers=headers,
                    )
                    assert json.loads(reply.data)["ok"] is True, reply.data
                    assert not _leaks(reply.data.decode()), f"servers.get over NATS as {role}"
            finally:
                await nc.drain()
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
