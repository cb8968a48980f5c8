"""Fair share between namespaces against real NATS, Postgres and MCP peers: one tenant using all it
may (servers, tools, MCP sessions, calls per second, code-mode workers) is refused with the
contract's errors while another tenant goes on working, and nothing refused reaches an upstream."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.harness import System, eventually, running_system
from tests.mcp_client import mcp_session, mcp_url
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"


async def admin_token(system: System, namespace: str) -> str:
    return str((await system.create_key(f"admin-{namespace}", "admin", namespace=namespace))["token"])


async def register(api: httpx.AsyncClient, name: str, config: dict[str, Any], **fields: Any) -> httpx.Response:
    body = {"name": name, "transport_type": "STDIO", "connection_config": config, **fields}
    return await api.post(SERVERS, json=body)


async def test_a_namespace_at_its_server_limit_does_not_starve_another(nats_url: str, database_url: str) -> None:
    async with (
        launch_peer("stdio") as peer,
        running_system(
            nats_url,
            database_url,
            roles=["gateway", "projector"],
            max_servers=10,
            namespace_max_servers=2,
            namespace_limits={"team-b": {"max_servers": 3}},
        ) as system,
    ):
        async with system.client_as(await admin_token(system, "team-a")) as a:
            for name in ("s1", "s2"):
                assert (await register(a, name, peer.config, auto_connect=False)).status_code == 201
            refused = await register(a, "s3", peer.config, auto_connect=False)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error_code"] == "LIMIT_EXCEEDED"
        assert refused.json()["context"] == {"namespace": "team-a", "namespace_max_servers": 2}
        async with system.client_as(await admin_token(system, "team-b")) as b:
            for name in ("s1", "s2", "s3"):  # team-b's own, larger share; the global limit is not reached
                assert (await register(b, name, peer.config, auto_connect=False)).status_code == 201
            assert (await register(b, "s4", peer.config, auto_connect=False)).status_code == 409
        rows = await system.backends.db.fetch("SELECT namespace, count(*) AS n FROM mcp.external_servers GROUP BY 1")
        assert {r["namespace"]: r["n"] for r in rows} == {"team-a": 2, "team-b": 3}


async def test_a_namespace_over_its_tool_limit_is_refused_while_another_connects(
    nats_url: str, database_url: str
) -> None:
    async with (
        launch_peer("stdio") as peer,
        running_system(
            nats_url, database_url, namespace_limits={"team-a": {"max_tools": 1}}, error_retry_seconds=(120.0,)
        ) as system,
    ):
        a = await system.register("tools", peer.transport_type, peer.config, namespace="team-a")
        b = await system.register("tools", peer.transport_type, peer.config, namespace="team-b")
        refused = await system.wait_status(a["id"], "ERROR")
        assert "LIMIT_EXCEEDED" in refused["error_message"] and "team-a" in refused["error_message"]
        connected = await system.wait_connected(b["id"])
        assert connected["tool_count"] > 1
        namespaces = await system.backends.db.fetch("SELECT DISTINCT namespace FROM mcp.tools")
        assert [r["namespace"] for r in namespaces] == ["team-b"]  # team-a's tools never entered the catalog


async def test_a_namespace_over_its_call_rate_gets_429_and_another_still_calls(
    nats_url: str, database_url: str
) -> None:
    async with (
        launch_peer("http") as canary,
        running_system(nats_url, database_url, namespace_calls_per_second=0.1, namespace_calls_burst=3) as system,
    ):
        servers = {}
        for namespace in ("team-a", "team-b"):
            created = await system.register("canary", canary.transport_type, canary.config, namespace=namespace)
            servers[namespace] = (await system.wait_connected(created["id"]))["id"]
        async with system.client_as(await admin_token(system, "team-a")) as a:
            calls = 0

            async def limited() -> httpx.Response | None:
                nonlocal calls
                calls += 1
                body = {"name": "tally", "server_id": servers["team-a"], "arguments": {"key": f"a-{calls}"}}
                response = await a.post("/api/v1/tools/call", json=body)
                return response if response.status_code == 429 else None

            refused = await eventually(limited, timeout=30, what="team-a's calls to be rate limited")
        assert refused.json()["error_code"] == "RATE_LIMITED"
        assert refused.json()["context"]["namespace"] == "team-a"
        assert int(refused.headers["retry-after"]) >= 1
        async with system.client_as(await admin_token(system, "team-b")) as b:
            own = {"name": "tally", "server_id": servers["team-b"], "arguments": {"key": "b-1"}}
            assert (await b.post("/api/v1/tools/call", json=own)).status_code == 200
            seen = await b.post("/api/v1/tools/call", json={"name": "tallies", "server_id": servers["team-b"]})
        tallies = seen.json()["structuredContent"]
        assert tallies.get(f"a-{calls}") is None  # the refused call never reached the upstream
        assert tallies["b-1"] == 1


async def test_a_namespace_at_its_mcp_session_limit_does_not_block_another(nats_url: str, database_url: str) -> None:
    async with running_system(
        nats_url, database_url, roles=["gateway", "projector"], namespace_max_mcp_sessions=2, key_max_mcp_sessions=2
    ) as system:
        tokens = {ns: await admin_token(system, ns) for ns in ("team-a", "team-b")}
        tokens["team-a-2"] = str((await system.create_key("other", "user", namespace="team-a"))["token"])

        async def initialize(http: httpx.AsyncClient, holder: str) -> httpx.Response:
            headers = {**MCP_ACCEPT, "Authorization": f"Bearer {tokens[holder]}"}
            return await http.post(mcp_url(system), json=INITIALIZE, headers=headers)

        async with httpx.AsyncClient(timeout=30) as http:
            opened = [await initialize(http, holder) for holder in ("team-a", "team-a-2")]  # one each: below a key's 2
            assert [r.status_code for r in opened] == [200, 200]
            refused = await initialize(http, "team-a")  # another key's idle session is never ended for it
            assert refused.status_code == 409, refused.text
            assert refused.json()["error_code"] == "LIMIT_EXCEEDED"
            assert refused.json()["context"] == {"namespace": "team-a", "namespace_max_mcp_sessions": 2}
            assert (await initialize(http, "team-b")).status_code == 200
            ended = await http.delete(
                mcp_url(system),
                headers={
                    "Authorization": f"Bearer {tokens['team-a']}",
                    "mcp-session-id": opened[0].headers["mcp-session-id"],
                },
            )
            assert ended.status_code == 200, ended.text
            assert (await initialize(http, "team-a")).status_code == 200  # an ended session frees its place


async def run_code(system: System, token: str, code: str, timeout: float) -> dict[str, Any]:
    async with mcp_session(system, mode="search", token=token) as session:
        result = await session.call_tool("run", {"code": code, "timeout_seconds": timeout})
    body: dict[str, Any] = result.structured_content or {}
    return body


async def test_one_tenants_loops_cannot_starve_another_tenants_code_mode(nats_url: str, database_url: str) -> None:
    """Tenant A fills code mode with long loops (more runs than the pool has workers); tenant B's
    ``1 + 1`` completes while every one of A's loops is still running or waiting."""
    async with launch_peer("http") as beta, running_system(nats_url, database_url, code_max_workers=2) as system:
        created = await system.register("beta", beta.transport_type, beta.config, namespace="team-a")
        server_id = (await system.wait_connected(created["id"]))["id"]
        a_token, b_token = await admin_token(system, "team-a"), await admin_token(system, "team-b")
        loop = "beta.slow(seconds=0)\nwhile True:\n    pass"
        loops = [asyncio.create_task(run_code(system, a_token, loop, 20.0)) for _ in range(3)]
        try:
            async with system.client_as(a_token) as a:

                async def a_is_looping() -> bool:
                    stats = await a.post("/api/v1/tools/call", json={"name": "stats", "server_id": server_id})
                    return bool(stats.json()["structuredContent"]["slow_started"] >= 1)

                await eventually(a_is_looping, timeout=30, what="tenant A's first loop to hold a worker")
            assert not any(task.done() for task in loops)
            sum_of_b = await run_code(system, b_token, "1 + 1", 20.0)
            assert sum_of_b["ok"] and sum_of_b["result"] == 2, json.dumps(sum_of_b)
            assert not any(task.done() for task in loops)  # B finished before any of A's loops ended
        finally:
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
