"""Upstreams that misbehave, against every role as its own process: one floods, one hangs, one returns 50 MB.

Each time the call ends as the contract says (a result, a timeout, an error), the session-worker holding
the upstream stays alive with its session, and the next call through the other gateway succeeds.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.faults.cluster import Cluster, running_cluster
from tests.harness import System, eventually
from tests.peers.launch import launch_peer
from toolmesh_cli.embedded import EmbeddedNats

CALL = "/api/v1/tools/call"
FLOOD_GUARD_SECONDS = 25.0  # under the test client's 30 s read timeout
ECHOES_DURING_FLOOD = 10


@dataclass
class Upstream:
    """A cluster with one HTTP demo server registered and connected."""

    cluster: Cluster
    systems: list[System]
    server_id: str

    async def call(self, gateway: int, tool: str, arguments: dict[str, Any], **fields: Any) -> httpx.Response:
        body = {"name": f"misbehaving.{tool}", "arguments": arguments, **fields}
        return await self.systems[gateway].api.post(CALL, json=body)

    async def assert_healthy(self) -> None:
        """Both session-workers run, the server is CONNECTED, and an echo answers through each gateway."""
        assert all(w.running() for w in self.cluster.of("session-worker")), self.cluster.logs()
        for gateway in (0, 1):
            response = await self.call(gateway, "echo", {"text": f"still here {gateway}"})
            assert response.status_code == 200, response.text
            assert response.json()["content"][0]["text"] == f"still here {gateway}"
        assert (await self.systems[1].server(self.server_id))["status"] == "CONNECTED"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def upstream(tmp_path_factory: pytest.TempPathFactory, fault_postgres: Any) -> AsyncIterator[Upstream]:
    logs = tmp_path_factory.mktemp("roles")
    async with EmbeddedNats(tmp_path_factory.mktemp("nats")) as nats:
        database_url = await fault_postgres.ensure_database("upstream_faults")
        async with (
            launch_peer("http", name="misbehaving") as peer,
            running_cluster(nats.url, database_url, Path(logs)) as (cluster, systems),
        ):
            created = await systems[0].register("misbehaving", peer.transport_type, peer.config)
            await systems[0].wait_connected(created["id"], timeout=60)
            yield Upstream(cluster, systems, created["id"])


async def test_flooding_upstream_does_not_starve_other_calls(upstream: Upstream) -> None:
    """Calls through the other gateway are answered while the upstream floods, which it does until the
    test stops it (``FLOOD_GUARD_SECONDS`` only bounds a flood nobody stops)."""
    stop = f"stop-{uuid.uuid4().hex}"
    flood = asyncio.create_task(upstream.call(0, "flood", {"seconds": FLOOD_GUARD_SECONDS, "until": stop}))

    async def flooding() -> int:
        response = await upstream.call(1, "stats", {})
        sent: int = response.json()["structuredContent"]["flood_sent"] if response.status_code == 200 else 0
        return sent

    flooded: int = await eventually(flooding, what="the upstream to flood")
    for n in range(ECHOES_DURING_FLOOD):
        response = await upstream.call(1, "echo", {"text": f"during flood {n}"})
        assert response.status_code == 200, response.text
        assert response.json()["content"][0]["text"] == f"during flood {n}"
    assert not flood.done(), "the flood ended before the calls made during it were answered"
    assert (await upstream.call(1, "tally", {"key": stop})).status_code == 200
    response = await flood
    assert response.status_code == 200, response.text
    assert int(response.json()["content"][0]["text"]) >= flooded > 0
    await upstream.assert_healthy()


async def test_hanging_upstream_call_times_out_with_the_contracts_error(upstream: Upstream) -> None:
    response = await upstream.call(0, "hang", {}, timeout_seconds=1.0)
    assert response.status_code == 504, response.text
    assert response.json()["error_code"] == "EXECUTION_TIMEOUT"
    await upstream.assert_healthy()


async def test_fifty_megabyte_result_is_delivered_or_refused_clearly(upstream: Upstream) -> None:
    workers = {w.pid for w in upstream.cluster.of("session-worker")}
    response = await upstream.call(0, "big", {"megabytes": 50})
    if response.status_code == 200:
        assert len(response.json()["content"][0]["text"]) == 50 * 1024 * 1024
    else:
        body = response.json()
        assert response.status_code == 502 and body["error_code"] == "EXECUTION_FAILED", response.text[:2000]
        assert body["context"]["result_bytes"] > 50 * 1024 * 1024 > body["context"]["limit_bytes"], body
    assert {w.pid for w in upstream.cluster.of("session-worker") if w.running()} == workers
    await upstream.assert_healthy()
