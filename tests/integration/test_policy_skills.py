"""Policies see a tool's classified skills and its category (``tool.skills``, ``tool.category``), from the
gateway's catalog: as the classification event arrives, and in a replica that loads its catalog from a snapshot."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, System, eventually, running_system, second_gateway
from tests.peers.launch import launch_chat_endpoint, launch_peer

pytestmark = pytest.mark.integration
CALL = "/api/v1/tools/call"
ADD = {"a": 1, "b": 2}


async def classification(system: System, server_id: str) -> set[str]:
    tools = (await system.api.get(f"/api/v1/aggregator/servers/{server_id}/tools")).json()["tools"]
    return {t["classification_status"] for t in tools}


@pytest.fixture
async def servers(nats_url: str, database_url: str) -> AsyncIterator[tuple[System, dict[str, Any]]]:
    """``skilled`` (every tool classified in the skill ``utilities``) and ``plain`` (classification failed:
    no skills), both the demo server."""
    async with launch_chat_endpoint() as endpoint, httpx.AsyncClient(base_url=endpoint.removesuffix("/v1")) as chat:
        settings: dict[str, Any] = {
            "classifier": "llm",
            "classifier_llm_base_url": endpoint,
            "classifier_llm_model": "test-model",
            "classification_max_attempts": 1,
            "classification_retry_seconds": (0.2,),
        }
        async with running_system(nats_url, database_url, **settings) as system, launch_peer("stdio") as peer:
            skilled = await system.register("skilled", peer.transport_type, peer.config)
            await system.wait_connected(skilled["id"])

            async def classified() -> bool:
                return await classification(system, skilled["id"]) == {"CLASSIFIED"}

            await eventually(classified, timeout=60, what="the skilled server's tools to be classified")
            await chat.post("/control", json={"failing": True})
            plain = await system.register("plain", peer.transport_type, peer.config)
            await system.wait_connected(plain["id"])

            async def unclassified() -> bool:
                return await classification(system, plain["id"]) == {"UNCLASSIFIED"}

            await eventually(unclassified, timeout=60, what="the plain server's classification to give up")
            yield system, {"skilled": skilled["id"], "plain": plain["id"]}


async def test_a_rule_on_tool_skills_denies_the_tool_with_that_skill_only(
    servers: tuple[System, dict[str, Any]],
) -> None:
    system, _ = servers
    rule = {"name": "no-utilities", "expression": '"utilities" in tool.skills', "effect": "deny", "reason": "No"}
    assert (await system.api.post("/api/v1/policies", json=rule)).status_code == 201

    async def denied() -> bool:
        return (await system.api.post(CALL, json={"name": "skilled.add", "arguments": ADD})).status_code == 403

    await eventually(denied, timeout=10, what="the policy to deny the classified tool")
    allowed = await system.api.post(CALL, json={"name": "plain.add", "arguments": ADD})
    assert allowed.status_code == 200, allowed.text
    async with second_gateway(system) as (_, port_b):  # its catalog comes from the snapshot
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_b}", headers=headers, timeout=30) as b:

            async def answered() -> bool:
                return (await b.get("/api/v1/aggregator/servers")).status_code == 200

            await eventually(answered, timeout=30, what="replica B to answer")
            refused = await b.post(CALL, json={"name": "skilled.add", "arguments": ADD})
            assert refused.status_code == 403 and refused.json()["error_code"] == "POLICY_DENIED"
            assert (await b.post(CALL, json={"name": "plain.add", "arguments": ADD})).status_code == 200


async def test_a_rule_on_tool_category_sees_the_catalogs_category(servers: tuple[System, dict[str, Any]]) -> None:
    system, ids = servers
    tools = (await system.api.get(f"/api/v1/aggregator/servers/{ids['plain']}/tools")).json()["tools"]
    categories = {t["original_name"]: t["category"] for t in tools}
    other = next(name for name, category in categories.items() if category != categories["add"])
    expression = f'tool.category == "{categories["add"]}" && server.name == "plain"'
    rule = {"name": "by-category", "expression": expression, "effect": "deny", "reason": "No"}
    assert (await system.api.post("/api/v1/policies", json=rule)).status_code == 201

    async def denied() -> bool:
        return (await system.api.post(CALL, json={"name": "plain.add", "arguments": ADD})).status_code == 403

    await eventually(denied, timeout=10, what="the policy to deny by category")
    called = await system.api.post(CALL, json={"name": f"plain.{other}", "arguments": {"text": "x", "query": "x"}})
    assert called.json().get("error_code") != "POLICY_DENIED", called.text
