"""The contract's resource limits beyond the server count, against real NATS, Postgres and MCP peers:
max total tools (atomic when servers connect at once) and max concurrent upstream sessions per
session-worker — each refused with ``LIMIT_EXCEEDED`` and counted in
``mcp_aggregator_limit_rejections_total``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.harness import System, eventually, running_system
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"


async def rejections(system: System, limit: str) -> float:
    text = (await system.api.get("/metrics")).text
    prefix = f'mcp_aggregator_limit_rejections_total{{limit="{limit}"}}'
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


async def settled(system: System, server_ids: list[str]) -> list[dict[str, Any]]:
    """The servers' details once none of them is still connecting."""

    async def probe() -> list[dict[str, Any]] | None:
        details = [await system.server(server_id) for server_id in server_ids]
        return details if all(d["status"] in ("CONNECTED", "ERROR") for d in details) else None

    return await eventually(probe, what="every server CONNECTED or in ERROR")


async def test_servers_connecting_at_once_cannot_pass_the_total_tools_limit(nats_url: str, database_url: str) -> None:
    async with launch_peer("stdio", tools=5) as peer:
        async with running_system(nats_url, database_url) as probe_system:
            probe = await probe_system.register("probe", peer.transport_type, peer.config)
            per_server = (await probe_system.wait_connected(probe["id"]))["tool_count"]
            assert (await probe_system.api.delete(f"{SERVERS}/{probe['id']}")).status_code == 204
        limit = 2 * per_server + 3  # room for two servers' tools, not three
        async with running_system(
            nats_url, database_url, max_total_tools=limit, error_retry_seconds=(120.0,)
        ) as system:
            created = await asyncio.gather(
                *(system.register(f"s{i}", peer.transport_type, peer.config) for i in range(3))
            )
            details = await settled(system, [c["id"] for c in created])
            assert sorted(d["status"] for d in details) == ["CONNECTED", "CONNECTED", "ERROR"]
            refused = next(d for d in details if d["status"] == "ERROR")
            assert "LIMIT_EXCEEDED" in refused["error_message"] and refused["next_retry_at"] is not None
            total = await system.backends.db.fetchval("SELECT count(*) FROM mcp.tools")
            assert total == 2 * per_server <= limit
            assert await rejections(system, "tools") >= 1


async def test_a_full_session_worker_refuses_more_sessions_until_one_is_freed(nats_url: str, database_url: str) -> None:
    async with (
        launch_peer("stdio") as peer,
        running_system(nats_url, database_url, max_sessions_per_worker=1, error_retry_seconds=(0.5,)) as system,
    ):
        first = await system.register("first", peer.transport_type, peer.config)
        await system.wait_connected(first["id"])
        second = await system.register("second", peer.transport_type, peer.config)
        refused = await system.wait_status(second["id"], "ERROR")
        assert "LIMIT_EXCEEDED" in refused["error_message"]
        assert await rejections(system, "sessions") >= 1

        response = await system.api.post(f"{SERVERS}/{first['id']}/disconnect", json={"force": True})
        assert response.status_code == 200, response.text
        await system.wait_connected(second["id"])
