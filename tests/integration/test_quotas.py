"""Durable quotas against real NATS, Postgres and an MCP peer: counted across two gateway replicas
(one in this process, one an OS process of its own), kept in JetStream across a restart of both, per
key, namespace and server; a refused call never reaches the upstream; headers and the 429 body name
the quota; only the owner and a namespace's admins set quotas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS

from tests.harness import System, eventually, running_system, second_gateway
from tests.mcp_client import mcp_session
from tests.peers.launch import launch_peer
from toolmesh.contracts.quotas import QUOTA_STREAMS, QuotaWindow, quota_subject
from toolmesh.platform.bus.connection import connect_nats
from toolmesh.platform.bus.topology import ensure_streams
from toolmesh_cli.embedded import EmbeddedNats
from toolmesh_gateway.quota_counters import QuotaCounters

pytestmark = pytest.mark.integration
QUOTAS = "/api/v1/quotas"
CALL = "/api/v1/tools/call"


def next_utc_midnight() -> int:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return int((today + timedelta(days=1)).timestamp())


async def tally(api: httpx.AsyncClient, server_id: str, key: str) -> httpx.Response:
    return await api.post(CALL, json={"name": "tally", "server_id": server_id, "arguments": {"key": key}})


async def tallies(api: httpx.AsyncClient, server_id: str) -> dict[str, int]:
    response = await api.post(CALL, json={"name": "tallies", "server_id": server_id})
    assert response.status_code == 200, response.text
    result: dict[str, int] = response.json()["structuredContent"]
    return result


async def set_quota(api: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await api.post(QUOTAS, json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_a_quota_holds_across_two_replicas_and_its_count_survives_a_restart_of_both(
    nats_url: str, database_url: str
) -> None:
    async with launch_peer("http") as peer:
        async with running_system(nats_url, database_url) as system:
            server_id = (await system.register("canary", peer.transport_type, peer.config))["id"]
            await system.wait_connected(server_id)
            user = (await system.create_key("caller", "user"))["token"]
            quota = await set_quota(system.api, scope="key", target="caller", per_day=5)
            async with second_gateway(system) as (_, port_b), system.client_as(user) as a:
                b = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_b}", headers=a.headers, timeout=30)
                async with b:
                    assert [(await tally(a, server_id, f"a{i}")).status_code for i in range(3)] == [200] * 3
                    via_b = await tally(b, server_id, "b0")
                    assert via_b.status_code == 200, via_b.text
                    assert via_b.headers["x-ratelimit-remaining"] == "1"  # 4 of 5 counted, whichever replica
        async with running_system(nats_url, database_url) as system:  # both replicas restarted
            await system.wait_connected(server_id)
            async with second_gateway(system) as (_, port_b), system.client_as(user) as a:
                b = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_b}", headers=a.headers, timeout=30)
                async with b:
                    last = await tally(b, server_id, "b1")
                    assert last.status_code == 200, last.text
                    assert last.headers["x-ratelimit-remaining"] == "0"
                    refused = await tally(a, server_id, "a-refused")
            assert refused.status_code == 429, refused.text
            body = refused.json()
            assert body["error_code"] == "RATE_LIMITED"
            assert {k: body["context"][k] for k in ("quota_id", "scope", "target", "window", "limit")} == {
                "quota_id": quota["id"],
                "scope": "key",
                "target": "caller",
                "window": "day",
                "limit": 5,
            }
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.headers["x-ratelimit-reset"] == str(next_utc_midnight())
            seen = await tallies(system.api, server_id)  # the owner's key has no quota
            assert "a-refused" not in seen  # the refused call never reached the upstream
            assert sum(seen.values()) == 5
            shown = (await system.api.get(f"{QUOTAS}/{quota['id']}")).json()
            assert shown["usage"] == {"day": 5}  # refused calls are not counted


async def test_headers_name_the_tightest_quota_and_a_key_quota_spares_other_keys(system: System) -> None:
    async with launch_peer("http") as peer:
        server_id = (await system.register("canary", peer.transport_type, peer.config))["id"]
        await system.wait_connected(server_id)
        await set_quota(system.api, scope="key", target="u1", per_day=2, per_month=100)
        await set_quota(system.api, scope="namespace", per_day=50)
        u1 = (await system.create_key("u1", "user"))["token"]
        u2 = (await system.create_key("u2", "user"))["token"]
        async with system.client_as(u1) as one, system.client_as(u2) as two:
            first = await tally(one, server_id, "u1-1")
            assert (first.headers["x-ratelimit-limit"], first.headers["x-ratelimit-remaining"]) == ("2", "1")
            assert first.headers["x-ratelimit-reset"] == str(next_utc_midnight())
            assert (await tally(one, server_id, "u1-2")).headers["x-ratelimit-remaining"] == "0"
            refused = await tally(one, server_id, "u1-3")
            other = await tally(two, server_id, "u2-1")
        assert refused.status_code == 429
        assert refused.json()["context"]["scope"] == "key" and refused.json()["context"]["target"] == "u1"
        assert refused.headers["x-ratelimit-remaining"] == "0" and refused.headers["x-ratelimit-limit"] == "2"
        assert other.status_code == 200  # u2 is under the namespace quota only: 3 of 50 counted
        assert (other.headers["x-ratelimit-limit"], other.headers["x-ratelimit-remaining"]) == ("50", "47")
        assert "u1-3" not in await tallies(system.api, server_id)


async def test_a_server_quota_limits_that_server_only(system: System) -> None:
    async with launch_peer("http") as peer:
        ids = {}
        for name in ("limited", "free"):
            ids[name] = (await system.register(name, peer.transport_type, peer.config))["id"]
            await system.wait_connected(ids[name])
        await set_quota(system.api, scope="server", target="limited", per_month=1)
        assert (await tally(system.api, ids["limited"], "s-1")).status_code == 200
        refused = await tally(system.api, ids["limited"], "s-2")
        assert refused.status_code == 429
        context = refused.json()["context"]
        assert (context["scope"], context["target"], context["window"]) == ("server", "limited", "month")
        free = await tally(system.api, ids["free"], "f-1")
        assert free.status_code == 200 and "x-ratelimit-limit" not in free.headers  # no quota applies


async def test_a_namespace_quota_refuses_on_mcp_as_a_tool_error(system: System) -> None:
    async with launch_peer("http") as peer:
        server_id = (await system.register("canary", peer.transport_type, peer.config))["id"]
        await system.wait_connected(server_id)
        quota = await set_quota(system.api, scope="namespace", per_day=1)
        async with mcp_session(system) as session:
            assert not (await session.call_tool("canary__tally", {"key": "m-1"})).is_error
            refused = await session.call_tool("canary__tally", {"key": "m-2"})
            async with mcp_session(system, path="/mcp/canary") as transparent:  # forwarded as it is
                forwarded = await transparent.call_tool("tally", {"key": "t-1"})
        assert refused.is_error
        assert "Quota exceeded: 1 tool calls per day of namespace 'default'" in refused.content[0].text  # type: ignore[union-attr]
        assert forwarded.is_error and "Quota exceeded" in forwarded.content[0].text  # type: ignore[union-attr]
        assert (await system.api.delete(f"{QUOTAS}/{quota['id']}")).status_code == 204
        seen = await tallies(system.api, server_id)  # no quota now: this call goes through
        assert "m-2" not in seen and "t-1" not in seen


async def test_only_the_owner_and_the_namespaces_admins_set_quotas(system: System) -> None:
    admin = (await system.create_key("team-admin", "admin", namespace="team-a"))["token"]
    user = (await system.create_key("team-user", "user", namespace="team-a"))["token"]
    other = (await system.create_key("other-admin", "admin", namespace="team-b"))["token"]
    async with system.client_as(admin) as a, system.client_as(user) as u, system.client_as(other) as o:
        quota = await set_quota(a, scope="key", target="team-user", per_day=3)
        assert quota["namespace"] == "team-a"
        raised = {"scope": "key", "target": "team-user", "per_day": 1000}
        assert (await u.post(QUOTAS, json={**raised, "target": "other"})).status_code == 403
        assert (await u.put(f"{QUOTAS}/{quota['id']}", json=raised)).status_code == 403
        assert (await u.delete(f"{QUOTAS}/{quota['id']}")).status_code == 403
        assert (await u.get(f"{QUOTAS}/{quota['id']}")).json()["per_day"] == 3  # seen, unchanged
        assert (await o.get(f"{QUOTAS}/{quota['id']}")).status_code == 404  # another namespace's
        assert (await o.put(f"{QUOTAS}/{quota['id']}", json=raised)).status_code == 404
        elsewhere = await a.post(QUOTAS, json={**raised, "namespace": "team-b"})
        assert elsewhere.status_code == 403
        assert (await a.post(QUOTAS, json={"scope": "key", "target": "team-user", "per_day": 9})).status_code == 409
        changed = await a.put(f"{QUOTAS}/{quota['id']}", json={**raised, "per_day": 4})
        assert changed.status_code == 200 and changed.json()["per_day"] == 4
        assert (await system.api.delete(f"{QUOTAS}/{quota['id']}")).status_code == 204
        assert (await a.get(QUOTAS)).json()["total"] == 0


async def test_a_quota_set_through_one_replica_binds_calls_through_the_other_promptly(system: System) -> None:
    async with launch_peer("http") as peer, second_gateway(system) as (_, port_b):
        server_id = (await system.register("canary", peer.transport_type, peer.config))["id"]
        await system.wait_connected(server_id)
        b = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_b}", headers=system.api.headers, timeout=30)
        async with b:
            assert "x-ratelimit-limit" not in (await tally(b, server_id, "before")).headers
            await set_quota(system.api, scope="server", target="canary", per_minute=1_000_000)
            calls = 0

            async def limited() -> httpx.Response | None:
                nonlocal calls
                calls += 1
                response = await tally(b, server_id, f"b-{calls}")
                return response if "x-ratelimit-limit" in response.headers else None

            seen = await eventually(limited, timeout=20, what="replica B to load the new quota")
        assert seen.headers["x-ratelimit-limit"] == "1000000"


async def test_without_its_counts_a_call_under_a_quota_is_refused_and_other_calls_go_on(
    system: System, nc: NATS
) -> None:
    async with launch_peer("http") as peer:
        ids = {}
        for name in ("limited", "free"):
            ids[name] = (await system.register(name, peer.transport_type, peer.config))["id"]
            await system.wait_connected(ids[name])
        await set_quota(system.api, scope="server", target="limited", per_day=100)
        assert (await tally(system.api, ids["limited"], "counted")).status_code == 200
        await nc.jetstream().delete_stream(QUOTA_STREAMS[QuotaWindow.DAY][0])  # the day's counts are gone
        refused = await tally(system.api, ids["limited"], "uncounted")
        assert refused.status_code == 503, refused.text
        assert refused.json()["error_code"] == "BACKEND_UNAVAILABLE"
        assert refused.json()["context"]["reason"] == "quota_counts_unreachable"
        assert (await tally(system.api, ids["free"], "free")).status_code == 200  # no quota: not affected
        assert "uncounted" not in await tallies(system.api, ids["free"])  # one process serves both servers


async def test_counts_survive_a_restart_of_nats_itself(nats_url: str, embedded_nats: EmbeddedNats) -> None:
    subject = quota_subject(QuotaWindow.MONTH, "202611", "restart-check")
    nc = await connect_nats(nats_url, "test")
    try:
        await ensure_streams(nc.jetstream(timeout=5), [QUOTA_STREAMS[QuotaWindow.MONTH][0]])
        assert await QuotaCounters(nc.jetstream(timeout=5)).add([subject, subject], 1) in ([1, 2], [2, 1])
    finally:
        await nc.close()
    await embedded_nats.stop()
    await embedded_nats.start()
    nc = await connect_nats(embedded_nats.url, "test")
    try:
        counters = QuotaCounters(nc.jetstream(timeout=5))
        assert await counters.read(QuotaWindow.MONTH, subject) == 2  # file storage: the count is still there
        assert await counters.add([subject], 1) == [3]
    finally:
        await nc.close()
