"""Changes of quotas: each one is in the audit log (who, from where, before and after), and counts belong to
what a quota counts (namespace, scope, target), so a quota moved to another target does not carry its old
target's count there."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.harness import System
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
QUOTAS = "/api/v1/quotas"
CALL = "/api/v1/tools/call"


async def audited(system: System, event: str) -> list[dict[str, Any]]:
    page = await system.api.get("/api/v1/audit", params={"event": event})
    assert page.status_code == 200, page.text
    entries: list[dict[str, Any]] = page.json()["entries"]
    return entries


async def tally(api: httpx.AsyncClient, server_id: str, key: str) -> httpx.Response:
    response = await api.post(CALL, json={"name": "tally", "server_id": server_id, "arguments": {"key": key}})
    assert response.status_code in (200, 429), response.text
    return response


async def test_every_quota_change_is_audited_with_its_author_and_the_quota_before_and_after(system: System) -> None:
    admin = (await system.create_key("team-admin", "admin", namespace="team-a"))["token"]
    user = (await system.create_key("team-user", "user", namespace="team-a"))["token"]
    async with system.client_as(admin) as a, system.client_as(user) as u:
        created = await a.post(QUOTAS, json={"scope": "key", "target": "team-user", "per_day": 3})
        assert created.status_code == 201, created.text
        quota_id = created.json()["id"]
        refused = await u.put(f"{QUOTAS}/{quota_id}", json={"scope": "key", "target": "x", "per_day": 9})
        assert refused.status_code == 403
        changed = await a.put(f"{QUOTAS}/{quota_id}", json={"scope": "server", "target": "github", "per_minute": 5})
        assert changed.status_code == 200, changed.text
        taken = await a.post(QUOTAS, json={"scope": "server", "target": "github", "per_day": 1})
        assert taken.status_code == 409
        assert (await a.delete(f"{QUOTAS}/{quota_id}")).status_code == 204
        own = (await a.get("/api/v1/audit", params={"event": "quota.deleted"})).json()["entries"]
        assert [e["details"]["quota_id"] for e in own] == [quota_id]  # an admin reads its namespace's
    first = {"scope": "key", "target": "team-user", "per_minute": None, "per_day": 3, "per_month": None}
    then = {"scope": "server", "target": "github", "per_minute": 5, "per_day": None, "per_month": None}
    expected = {
        "quota.created": {"quota_id": quota_id, "before": None, "after": first},
        "quota.updated": {"quota_id": quota_id, "before": first, "after": then},
        "quota.deleted": {"quota_id": quota_id, "before": then, "after": None},
    }
    for event, details in expected.items():
        entries = await audited(system, event)
        assert len(entries) == 1, (event, entries)  # the refused PUT and the 409 left nothing
        assert entries[0]["details"] == details
        assert (entries[0]["actor"], entries[0]["namespace"]) == ("team-admin", "team-a")
        assert entries[0]["ip_address"] == "127.0.0.1"


async def test_a_quota_moved_to_another_target_limits_it_by_that_targets_own_count(system: System) -> None:
    async with launch_peer("http") as peer:
        server_id = (await system.register("canary", peer.transport_type, peer.config))["id"]
        await system.wait_connected(server_id)
        one = (await system.create_key("one", "user"))["token"]
        two = (await system.create_key("two", "user"))["token"]
        limit = await system.api.post(QUOTAS, json={"scope": "key", "target": "one", "per_day": 3})
        quota_id = limit.json()["id"]
        other = await system.api.post(QUOTAS, json={"scope": "key", "target": "two", "per_day": 100})
        async with system.client_as(one) as a, system.client_as(two) as b:
            assert [(await tally(a, server_id, f"one-{i}")).status_code for i in range(2)] == [200, 200]
            assert (await tally(b, server_id, "two-0")).status_code == 200  # two's count today: 1
            assert (await system.api.delete(f"{QUOTAS}/{other.json()['id']}")).status_code == 204
            moved = await system.api.put(f"{QUOTAS}/{quota_id}", json={"scope": "key", "target": "two", "per_day": 3})
            assert moved.status_code == 200 and moved.json()["usage"] == {"day": 1}  # two's own count, not one's 2
            counted = await tally(b, server_id, "two-1")
            assert counted.headers["x-ratelimit-remaining"] == "1"  # 2 of 3: one's calls were not inherited
            free = await tally(a, server_id, "one-free")
            assert free.status_code == 200 and "x-ratelimit-limit" not in free.headers  # no quota limits one now
            back = await system.api.put(f"{QUOTAS}/{quota_id}", json={"scope": "key", "target": "one", "per_day": 3})
            assert back.json()["usage"] == {"day": 2}  # one's count was kept for one (the uncounted call aside)
            assert (await tally(a, server_id, "one-2")).headers["x-ratelimit-remaining"] == "0"
            assert (await tally(a, server_id, "one-3")).status_code == 429
