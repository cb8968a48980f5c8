"""Importing an MCP Registry ``server.json`` through the API (what the console's form calls): the plan
and the import over REST and over NATS, the missing inputs named, and the registration rules of the
caller's role applied to what the entry turns into (an agent runs no package and reaches no loopback)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest

from tests.harness import ADMIN_TOKEN, System
from tests.peers.launch import PeerInfo, launch_peer
from toolmesh.contracts.api import api_subject

pytestmark = pytest.mark.integration
IMPORT = "/api/v1/aggregator/servers/import-registry"
TOKEN = "registry-api-token"


@pytest.fixture
async def http_peer() -> AsyncIterator[PeerInfo]:
    async with launch_peer("http", name="remote", token=TOKEN) as info:
        yield info


def remote_entry(url: str) -> dict[str, Any]:
    auth = {
        "name": "Authorization",
        "value": "Bearer {token}",
        "variables": {"token": {"description": "API token", "isRequired": True, "isSecret": True}},
    }
    region = {"name": "X-Region", "default": "eu", "choices": ["eu", "us"]}
    return {
        "name": "io.github.example/remote-demo",
        "description": "A remote demo server",
        "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": url, "headers": [auth, region]}],
        "packages": [
            {"registryType": "npm", "identifier": "@example/demo", "version": "1.0.0", "transport": {"type": "stdio"}}
        ],
    }


async def test_the_console_flow_plans_then_imports_and_the_server_connects(system: System, http_peer: PeerInfo) -> None:
    entry = {"server": remote_entry(str(http_peer.url)), "_meta": {}}
    plan = await system.api.post(f"{IMPORT}/plan", json={"document": entry})
    assert plan.status_code == 200, plan.text
    found = plan.json()
    assert (found["registry_name"], found["name"]) == ("io.github.example/remote-demo", "remote-demo")
    assert (found["option"]["kind"], found["option"]["index"]) == ("remote", 1)
    assert [(o["kind"], o["problem"]) for o in found["options"]] == [("remote", None), ("package", None)]
    assert [(i["name"], i["required"], i["secret"], i["default"]) for i in found["inputs"]] == [
        ("token", True, True, None),
        ("X-Region", False, False, "eu"),
    ]

    missing = await system.api.post(IMPORT, json={"document": entry})
    assert missing.status_code == 422
    assert missing.json()["error_code"] == "VALIDATION_ERROR"
    assert missing.json()["context"] == {"missing_inputs": ["token"]}
    assert "needs a value for token" in missing.json()["detail"]

    created = await system.api.post(IMPORT, json={"document": entry, "inputs": {"token": TOKEN}, "name": "demo-remote"})
    assert created.status_code == 201, created.text
    assert (created.json()["name"], created.json()["transport_type"]) == ("demo-remote", "HTTP")
    detail = await system.wait_connected(created.json()["id"])
    assert set(detail["connection_config"]["headers"]) == {"Authorization", "X-Region"}
    assert TOKEN not in json.dumps(detail)  # sealed, shown masked


async def test_an_agent_key_imports_no_package_and_no_loopback_remote(system: System, http_peer: PeerInfo) -> None:
    agent = (await system.create_key("importer", "agent"))["token"]
    entry = remote_entry(str(http_peer.url))
    async with system.client_as(agent) as api:
        package = await api.post(IMPORT, json={"document": entry, "package": 1})
        assert package.status_code == 403
        assert package.json()["context"] == {"role": "agent", "action": "register STDIO servers"}
        remote = await api.post(IMPORT, json={"document": entry, "inputs": {"token": TOKEN}})
        assert remote.status_code == 403, remote.text
        assert remote.json()["context"] == {
            "field": "connection_config.base_url",
            "action": "reach loopback or private addresses",
        }
    listed = (await system.api.get("/api/v1/aggregator/servers")).json()["servers"]
    assert listed == []


async def test_the_nats_operations_plan_and_import_the_same(system: System, http_peer: PeerInfo) -> None:
    nc = await nats.connect(system.settings.nats_url or "", connect_timeout=10)
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    async def ask(operation: str, payload: dict[str, Any]) -> dict[str, Any]:
        msg = await nc.request(api_subject(operation), json.dumps(payload).encode(), timeout=30, headers=headers)
        reply: dict[str, Any] = json.loads(msg.data)
        return reply

    try:
        entry = remote_entry(str(http_peer.url))
        plan = await ask("servers.import_plan", {"document": entry, "package": 1})
        assert plan["ok"] is True and plan["result"]["option"] == {
            "kind": "package",
            "index": 1,
            "label": "npm @example/demo@1.0.0",
            "problem": None,
        }
        refused = await ask("servers.import_registry", {"document": entry})
        assert refused["ok"] is False and refused["error"]["context"] == {"missing_inputs": ["token"]}
        hostile = {**entry, "remotes": [{**entry["remotes"][0], "url": "http://169.254.169.254/latest"}]}
        metadata = await ask("servers.import_registry", {"document": hostile, "inputs": {"token": TOKEN}})
        assert metadata["ok"] is False and metadata["error"]["error_code"] == "VALIDATION_ERROR"
        created = await ask("servers.import_registry", {"document": entry, "inputs": {"token": TOKEN}})
        assert created["ok"] is True, created
        await system.wait_connected(created["result"]["id"])
    finally:
        await nc.close()


async def test_an_entry_cannot_loosen_its_container_or_swap_its_package(system: System) -> None:
    image = {"registryType": "oci", "identifier": "example/weather:1.0", "transport": {"type": "stdio"}}
    hostile = [
        [{"type": "positional", "value": "--privileged"}, {"type": "named", "name": "-v", "value": "/:/host"}],
        [{"type": "positional", "value": "evil/image"}],
    ]
    for arguments in hostile:
        entry = {"name": "io.github.example/weather", "packages": [{**image, "runtimeArguments": arguments}]}
        for path in (f"{IMPORT}/plan", IMPORT):
            refused = await system.api.post(path, json={"document": entry})
            assert refused.status_code == 422, refused.text
            assert refused.json()["error_code"] == "VALIDATION_ERROR"
            assert "runtimeArguments" in refused.json()["detail"]
    preload = {"registryType": "npm", "identifier": "weather", "transport": {"type": "stdio"}}
    preload["environmentVariables"] = [{"name": "LD_PRELOAD", "value": "/tmp/x.so"}]
    refused = await system.api.post(IMPORT, json={"document": {"name": "io.github.example/w", "packages": [preload]}})
    assert refused.status_code == 422 and "LD_PRELOAD" in refused.json()["detail"], refused.text
    assert (await system.api.get("/api/v1/aggregator/servers")).json()["servers"] == []
