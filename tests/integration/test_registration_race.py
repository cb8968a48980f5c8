"""EC-004: two gateways racing to register one name: exactly one 201, the others 409."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, RoleProcess, eventually, make_settings, running_system
from toolmesh.embedded import free_port

pytestmark = pytest.mark.integration


async def test_ec004_two_gateways_one_name_one_winner(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, roles=["projector"]) as system:
        ports = [free_port(), free_port()]
        gateways = [RoleProcess("gateway", make_settings(nats_url, database_url, port=port)) for port in ports]
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
            body = {"name": "contested", "transport_type": "STDIO", "connection_config": {"command": "true"}}
            body["auto_connect"] = False
            responses = await asyncio.gather(
                *(clients[i % 2].post("/api/v1/aggregator/servers", json=body) for i in range(20))
            )
            codes = sorted(r.status_code for r in responses)
            assert codes == [201] + [409] * 19, [r.text for r in responses]
            assert all(r.json()["error_code"] == "SERVER_ALREADY_EXISTS" for r in responses if r.status_code == 409)
            assert await system.backends.db.fetchval("SELECT count(*) FROM mcp.external_servers") == 1
        finally:
            for client in clients:
                await client.aclose()
            for gateway in gateways:
                assert gateway.terminate() == 0
