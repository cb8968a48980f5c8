"""Managing policies: who may, per namespace or global, checked expressions, versions and the audit log."""

from __future__ import annotations

import json
from typing import Any

import nats
import pytest

from tests.harness import ADMIN_TOKEN, System

pytestmark = pytest.mark.integration
RULE = {"name": "no-deletes", "expression": 'tool.name.startsWith("delete_")', "effect": "deny", "reason": "No"}


async def test_only_managers_of_a_namespace_manage_its_policies(system: System) -> None:
    user = (await system.create_key("someone", "user"))["token"]
    agent = (await system.create_key("bot", "agent"))["token"]
    for token in (user, agent):
        async with system.client_as(token) as api:
            refused = await api.post("/api/v1/policies", json={**RULE, "namespace": "default"})
            assert refused.status_code == 403 and refused.json()["error_code"] == "FORBIDDEN", refused.text
            assert (await api.get("/api/v1/policies")).status_code == 403
    created = (await system.api.post("/api/v1/policies", json={**RULE, "namespace": "default"})).json()
    async with system.client_as(user) as api:
        assert (await api.put(f"/api/v1/policies/{created['id']}", json=RULE)).status_code == 403
        assert (await api.delete(f"/api/v1/policies/{created['id']}")).status_code == 403


async def test_a_namespace_admin_cannot_set_global_policies_nor_see_other_namespaces(system: System) -> None:
    admin = (await system.create_key("team-admin", "admin", namespace="team"))["token"]
    other = await system.api.post("/api/v1/policies", json={**RULE, "namespace": "other"})
    assert other.status_code == 201, other.text
    everywhere = await system.api.post("/api/v1/policies", json={**RULE, "name": "global-rule", "namespace": None})
    assert everywhere.status_code == 201 and everywhere.json()["namespace"] is None, everywhere.text
    async with system.client_as(admin) as api:
        refused = await api.post("/api/v1/policies", json={**RULE, "namespace": None})
        assert refused.status_code == 403, refused.text
        assert (await api.post("/api/v1/policies", json={**RULE, "namespace": "other"})).status_code == 403
        own = await api.post("/api/v1/policies", json={**RULE, "namespace": "team"})
        assert own.status_code == 201, own.text
        listed = (await api.get("/api/v1/policies")).json()
        assert {(p["name"], p["namespace"]) for p in listed["policies"]} == {
            ("global-rule", None),
            ("no-deletes", "team"),
        }
        assert (await api.get(f"/api/v1/policies/{other.json()['id']}")).status_code == 404
        assert (await api.delete(f"/api/v1/policies/{other.json()['id']}")).status_code == 404
        global_id = everywhere.json()["id"]
        assert (await api.put(f"/api/v1/policies/{global_id}", json=RULE)).status_code == 403
        assert (await api.delete(f"/api/v1/policies/{global_id}")).status_code == 403


@pytest.mark.parametrize(
    "expression",
    ["tool.name ==", 'request.path == "/"', "1 + 1", "lookup(tool.name)"],
)
async def test_a_bad_expression_is_a_validation_error(system: System, expression: str) -> None:
    response = await system.api.post("/api/v1/policies", json={**RULE, "expression": expression})
    assert response.status_code == 422 and response.json()["error_code"] == "VALIDATION_ERROR", response.text
    assert (await system.api.get("/api/v1/policies")).json()["total"] == 0


async def test_changes_are_versioned_and_audited(system: System) -> None:
    created = (await system.api.post("/api/v1/policies", json={**RULE, "namespace": "default"})).json()
    assert created["version"] == 1 and created["mode"] == "enforce"
    changed = await system.api.put(
        f"/api/v1/policies/{created['id']}", json={**RULE, "reason": "Still no", "mode": "dry_run"}
    )
    assert changed.status_code == 200, changed.text
    assert (changed.json()["version"], changed.json()["reason"], changed.json()["namespace"]) == (
        2,
        "Still no",
        "default",
    )
    taken = await system.api.post("/api/v1/policies", json={**RULE, "namespace": "default"})
    assert taken.status_code == 409 and taken.json()["error_code"] == "POLICY_ALREADY_EXISTS"
    assert (await system.api.delete(f"/api/v1/policies/{created['id']}")).status_code == 204
    assert (await system.api.get(f"/api/v1/policies/{created['id']}")).status_code == 404
    history: list[dict[str, Any]] = (await system.api.get(f"/api/v1/policies/{created['id']}/versions")).json()[
        "versions"
    ]
    assert [(v["version"], v["deleted"], v["mode"]) for v in history] == [
        (3, True, "dry_run"),
        (2, False, "dry_run"),
        (1, False, "enforce"),
    ]
    assert history[2]["reason"] == "No" and history[1]["actor"] == "admin"
    page = (await system.api.get("/api/v1/audit", params={"namespace": "default"})).json()
    events = [e["event"] for e in page["entries"] if e["details"].get("policy_id") == created["id"]]
    assert events == ["policy.deleted", "policy.saved", "policy.saved"]


async def test_policies_over_the_nats_api(system: System) -> None:
    nc = await nats.connect(system.settings.nats_url or "")
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    async def ask(operation: str, payload: dict[str, Any]) -> dict[str, Any]:
        msg = await nc.request(
            f"toolmesh.api.v1.{operation}", json.dumps(payload).encode(), timeout=30, headers=headers
        )
        reply: dict[str, Any] = json.loads(msg.data)
        return reply

    try:
        created = await ask("policies.create", {**RULE, "namespace": "default"})
        assert created["ok"] is True, created
        policy_id = created["result"]["id"]
        replaced = await ask("policies.replace", {**RULE, "policy_id": policy_id, "mode": "dry_run"})
        assert replaced["result"]["version"] == 2, replaced
        assert (await ask("policies.get", {"policy_id": policy_id}))["result"]["mode"] == "dry_run"
        assert (await ask("policies.list", {}))["result"]["total"] == 1
        bad = await ask("policies.create", {**RULE, "name": "bad", "expression": "1 +"})
        assert bad["ok"] is False and bad["error"]["error_code"] == "VALIDATION_ERROR", bad
        assert (await ask("policies.delete", {"policy_id": policy_id}))["ok"] is True
        versions = (await ask("policies.versions", {"policy_id": policy_id}))["result"]["versions"]
        assert [v["version"] for v in versions] == [3, 2, 1]
    finally:
        await nc.close()
