"""Registrations racing across two gateway processes: one name gets one winner (EC-004), and the
server limit holds however many registrations arrive at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, RoleProcess, eventually, make_settings, running_system
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def two_gateways(nats_url: str, database_url: str, **env: str) -> AsyncIterator[list[httpx.AsyncClient]]:
    """Two gateway processes on the same NATS and Postgres, and a client of each."""
    ports = [free_port(), free_port()]
    gateways = [RoleProcess("gateway", make_settings(nats_url, database_url, port=port), env=env) for port in ports]
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    clients = [httpx.AsyncClient(base_url=f"http://127.0.0.1:{p}", headers=headers, timeout=30) for p in ports]
    try:
        for client in clients:

            async def up(c: httpx.AsyncClient = client) -> bool:
                try:
                    return (await c.get("/api/v1/aggregator/health")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(up, timeout=30, what="a gateway to start")
        yield clients
    finally:
        for client in clients:
            await client.aclose()
        for gateway in gateways:
            assert gateway.terminate() == 0


def registration(name: str) -> dict[str, object]:
    return {"name": name, "transport_type": "STDIO", "connection_config": {"command": "true"}, "auto_connect": False}


async def test_ec004_two_gateways_one_name_one_winner(nats_url: str, database_url: str) -> None:
    async with (
        running_system(nats_url, database_url, roles=["projector"]) as system,
        two_gateways(nats_url, database_url) as clients,
    ):
        responses = await asyncio.gather(
            *(clients[i % 2].post("/api/v1/aggregator/servers", json=registration("contested")) for i in range(20))
        )
        codes = sorted(r.status_code for r in responses)
        assert codes == [201] + [409] * 19, [r.text for r in responses]
        assert all(r.json()["error_code"] == "SERVER_ALREADY_EXISTS" for r in responses if r.status_code == 409)
        assert await system.backends.db.fetchval("SELECT count(*) FROM mcp.external_servers") == 1


async def test_the_server_limit_holds_under_concurrent_registrations(nats_url: str, database_url: str) -> None:
    async with (
        running_system(nats_url, database_url, roles=["projector"]) as system,
        two_gateways(nats_url, database_url, MCP_AGGREGATOR_MAX_SERVERS="3") as clients,
    ):
        responses = await asyncio.gather(
            *(clients[i % 2].post("/api/v1/aggregator/servers", json=registration(f"s{i}")) for i in range(12))
        )
        codes = sorted(r.status_code for r in responses)
        assert codes == [201] * 3 + [409] * 9, [r.text for r in responses]
        refused = [r.json() for r in responses if r.status_code == 409]
        assert {body["error_code"] for body in refused} == {"LIMIT_EXCEEDED"}
        assert refused[0]["context"] == {"max_servers": 3}
        assert await system.backends.db.fetchval("SELECT count(*) FROM mcp.external_servers") == 3
        metrics = "\n".join([(await c.get("/metrics")).text for c in clients])
        counted = [
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith('mcp_aggregator_limit_rejections_total{limit="servers"}')
        ]
        assert sum(counted) == 9
