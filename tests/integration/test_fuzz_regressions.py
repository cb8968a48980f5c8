"""Inputs found by fuzzing (tests/fuzz and probes around it) that once broke toolmesh: each is now a 4xx."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.harness import System, eventually, running_system

pytestmark = pytest.mark.integration


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as running:
        yield running


@pytest.mark.parametrize("path", ["/api/v1/aggregator/servers", "/api/v1/audit"])
async def test_an_offset_beyond_the_database_integer_is_a_validation_error(system: System, path: str) -> None:
    response = await system.api.get(path, params={"offset": 2923262381298586541912752128})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["query", "offset"]


async def test_a_nul_in_an_audit_filter_is_a_validation_error(system: System) -> None:
    response = await system.api.get("/api/v1/audit", params={"actor": "\u00eb\u0000q", "event": "x"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["query", "actor"]


@pytest.mark.parametrize(
    "fields",
    [
        {"description": "a\u0000b"},
        {"connection_config": {"command": "srv", "args": ["--x\u0000"]}},
        {"connection_config": {"command": "srv", "env": {"K\u0000": "v"}}},
    ],
)
async def test_nul_in_a_registration_is_refused_and_cannot_stop_the_projection(
    system: System, fields: dict[str, object]
) -> None:
    body = {"name": "nul", "transport_type": "STDIO", "connection_config": {"command": "srv"}, "auto_connect": False}
    refused = await system.api.post("/api/v1/aggregator/servers", json={**body, **fields})
    assert refused.status_code == 422, refused.text
    assert "NUL" in refused.json()["detail"][0]["msg"]
    created = await system.register("after-nul", "STDIO", {"command": "srv"}, auto_connect=False)

    async def listed() -> bool:
        servers = (await system.api.get("/api/v1/aggregator/servers")).json()["servers"]
        return [s["id"] for s in servers] == [created["id"]]

    await eventually(listed, timeout=10, what="the next registration to be projected")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/quotas", {"scope": "namespace", "per_month": 9999999999}, "per_month"),
        ("/api/v1/quotas", {"scope": "key", "target": "dev\u0000", "per_day": 5}, "target"),
        ("/api/v1/policies", {"name": "p", "expression": "true", "effect": "deny", "reason": "a\u0000b"}, "reason"),
        ("/api/v1/policies", {"name": "p", "expression": "true", "effect": "redact", "redact": ["x\u0000"]}, "redact"),
    ],
)
async def test_governance_values_postgres_cannot_keep_are_validation_errors(
    system: System, path: str, body: dict[str, object], field: str
) -> None:
    """A limit past a Postgres INTEGER, or a NUL in text, once reached the database (a 500) or a
    projected event; both are refused as they arrive."""
    response = await system.api.post(path, json=body)
    assert response.status_code == 422, response.text
    assert field in str(response.json()["detail"]), response.text


async def test_a_quota_changed_past_a_postgres_integer_is_a_validation_error(system: System) -> None:
    created = await system.api.post("/api/v1/quotas", json={"scope": "namespace", "per_day": 5})
    assert created.status_code == 201, created.text
    changed = await system.api.put(
        f"/api/v1/quotas/{created.json()['id']}", json={"scope": "namespace", "per_month": 9999999999}
    )
    assert changed.status_code == 422, changed.text
    assert (await system.api.get(f"/api/v1/quotas/{created.json()['id']}")).json()["per_day"] == 5
