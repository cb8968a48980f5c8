"""What a STDIO server's connection config shows to each role (attack of issue 23: a ``user`` key read
``-p S7``, ``sk-proj-...`` and ``ghp_...`` from ``GET /servers/{id}``).

A role that does not manage the server (a user; an agent for another principal's server) sees none of
its ``args``; every role sees well-known token forms masked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import nats
import pytest

from tests.harness import System, running_system
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
OPENAI = "sk-proj-Q1w2E3r4T5y6U7i8O9p0AsDf"
GITHUB = "ghp_Zx9Cv8Bn7Mm6Ll5Kk4Jj3Hh2Gg1Ff0"
SHORT = "S7"


async def key(system: System, name: str, role: str) -> httpx.AsyncClient:
    return system.client_as((await system.create_key(name, role, namespace="default"))["token"])


@pytest.fixture
async def stdio_server(nats_url: str, database_url: str) -> AsyncIterator[tuple[System, str]]:
    async with running_system(nats_url, database_url) as system, launch_peer("stdio") as peer:
        config = {**peer.config, "args": [*peer.args, "-p", SHORT, OPENAI, f"--gh={GITHUB}"]}
        created = await system.register("leaky", "STDIO", config, auto_connect=False)
        yield system, created["id"]


async def shown_args(client: httpx.AsyncClient, server_id: str) -> list[str]:
    response = await client.get(f"{SERVERS}/{server_id}")
    assert response.status_code == 200, response.text
    args: list[str] = response.json()["connection_config"]["args"]
    return args


@pytest.mark.parametrize("role", ["user", "agent"])
async def test_a_role_that_does_not_manage_the_server_sees_none_of_its_args(
    stdio_server: tuple[System, str], role: str
) -> None:
    system, server_id = stdio_server
    async with await key(system, f"reader-{role}", role) as client:
        response = await client.get(f"{SERVERS}/{server_id}")
        assert response.status_code == 200, response.text
        body = response.text
        assert await shown_args(client, server_id) == ["***"]
    for secret in (OPENAI, GITHUB, f'"{SHORT}"', "-p"):
        assert secret not in body, f"{secret} shown to a {role} key"


@pytest.mark.parametrize("role", ["owner", "admin"])
async def test_a_manager_sees_the_args_with_token_forms_masked(stdio_server: tuple[System, str], role: str) -> None:
    system, server_id = stdio_server
    if role == "owner":
        args = await shown_args(system.api, server_id)
    else:
        async with await key(system, "manager", role) as client:
            args = await shown_args(client, server_id)
    assert args[-4:] == ["-p", SHORT, "***", "--gh=***"]
    assert args[0].endswith(".py")  # the command's own arguments stay readable for whoever manages it


async def test_the_nats_api_shows_the_args_by_the_same_rule(stdio_server: tuple[System, str]) -> None:
    system, server_id = stdio_server
    user = await system.create_key("nats-user", "user")
    tokens = {"user": user["token"], "owner": system.api.headers["Authorization"].split()[1]}
    nc = await nats.connect(system.settings.nats_url or "", connect_timeout=10)
    try:
        shown = {}
        for role, token in tokens.items():
            reply = await nc.request(
                "toolmesh.api.v1.servers.get",
                json.dumps({"server_id": server_id}).encode(),
                timeout=30,
                headers={"Authorization": f"Bearer {token}"},
            )
            body = json.loads(reply.data)
            assert body["ok"] is True, body
            shown[role] = body["result"]["connection_config"]["args"]
    finally:
        await nc.drain()
    assert shown["user"] == ["***"]
    assert shown["owner"][-4:] == ["-p", SHORT, "***", "--gh=***"]  # the owner manages it: args shown, tokens masked
