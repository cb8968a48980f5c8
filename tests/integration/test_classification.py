"""The tool classification state machine with an LLM classifier whose endpoint fails: a bounded
number of attempts, then UNCLASSIFIED (still searchable) until a retry classifies the tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.harness import System, eventually, running_system
from tests.peers.launch import launch_chat_endpoint, launch_peer
from toolmesh_classifier.llm import ATTEMPTS

pytestmark = pytest.mark.integration


@pytest.fixture
async def llm(nats_url: str, database_url: str) -> AsyncIterator[tuple[System, str]]:
    async with launch_chat_endpoint(failing=True) as endpoint:
        settings: dict[str, Any] = {
            "classifier": "llm",
            "classifier_llm_base_url": endpoint,
            "classifier_llm_model": "test-model",
            "classification_max_attempts": 2,
            "classification_retry_seconds": (0.2,),
        }
        async with running_system(nats_url, database_url, **settings) as system:
            yield system, endpoint.removesuffix("/v1")


async def statuses(system: System, server_id: str) -> dict[str, str]:
    tools = (await system.api.get(f"/api/v1/aggregator/servers/{server_id}/tools")).json()["tools"]
    return {t["original_name"]: t["classification_status"] for t in tools}


async def test_failing_classification_stops_and_a_retry_classifies(llm: tuple[System, str]) -> None:
    system, endpoint = llm
    async with launch_peer("stdio") as peer, httpx.AsyncClient(base_url=endpoint) as chat:
        server = await system.register("calc", peer.transport_type, peer.config)
        await system.wait_connected(server["id"])

        async def unclassified() -> dict[str, Any] | None:
            tools = (await system.api.get(f"/api/v1/aggregator/servers/{server['id']}/tools")).json()["tools"]
            return tools[0] if tools and all(t["classification_status"] == "UNCLASSIFIED" for t in tools) else None

        tool = await eventually(unclassified, timeout=60, what="every tool to end UNCLASSIFIED")
        assert "503" in tool["classification_error"] and tool["is_classified"] is False
        asked = (await chat.get("/calls")).json()["calls"]
        assert "CLASSIFICATION_FAILED" in await system.history(server["id"])
        found = (await system.api.post("/api/v1/search", json={"query": "add two numbers"})).json()["tools"]
        assert "calc.add" in {t["name"] for t in found}  # unclassified tools stay searchable

        # Bounded: each batch of 10 tools was tried twice (the setting), each time with the classifier's
        # own 3 requests, and no more.
        batches = -(-len(await statuses(system, server["id"])) // 10)
        assert asked == 2 * ATTEMPTS * batches

        await chat.post("/control", json={"failing": False})
        retry = await system.api.post(f"/api/v1/aggregator/servers/{server['id']}/tools/classify")
        assert retry.status_code == 202 and retry.json()["status"] == "CLASSIFYING"
        assert set(retry.json()["tools"]) == set(await statuses(system, server["id"]))

        async def classified() -> bool:
            return set((await statuses(system, server["id"])).values()) == {"CLASSIFIED"}

        await eventually(classified, timeout=60, what="the retry to classify every tool")
        tools = (await system.api.get(f"/api/v1/aggregator/servers/{server['id']}/tools")).json()
        assert tools["unclassified"] == 0 and all(t["skill_ids"] == ["utilities"] for t in tools["tools"])
        again = await system.api.post(f"/api/v1/aggregator/servers/{server['id']}/tools/classify")
        assert again.status_code == 202 and again.json()["tools"] == []
