"""Approvals of tool calls on the running system: a call waits in the gate until an approver decides
it through the REST API of the gateway (whose ``Approvals`` is another object than the test's, as a
second replica's would be), a rejection or the deadline refuses it, and only approvers decide."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS

from tests.approval_calls import SECRET, gate_on, pending_call, started, waiting
from tests.harness import ADMIN_TOKEN, System, eventually, second_gateway
from toolmesh.contracts.api import OPERATIONS_BY_NAME
from toolmesh.contracts.keys import Role
from toolmesh.errors import ApprovalRejected, ApprovalTimeout
from toolmesh.platform.bus.topology import APPROVALS_BUCKET
from toolmesh_gateway.auth import Principal


async def test_an_approval_by_rest_lets_the_call_go_on_and_both_steps_are_audited(system: System) -> None:
    gate = await gate_on(system)
    approver = await system.create_key("approver", "admin")
    call = await started(gate, pending_call("agent-ok"))
    shown = await waiting(system.api, "agent-ok")
    assert (shown["server"], shown["tool"], shown["surface"]) == ("files", "delete_file", "rest")
    assert shown["arguments"]["path"] == "/srv/data/report.csv"
    assert not call.done()
    async with system.client_as(approver["token"]) as api:
        decided = await api.post(f"/api/v1/approvals/{shown['id']}/approve", json={"comment": "fine"})
        assert decided.status_code == 200, decided.text
    await asyncio.wait_for(call, 20)
    detail = (await system.api.get(f"/api/v1/approvals/{shown['id']}")).json()
    assert (detail["state"], detail["decided_by"], detail["comment"]) == ("approved", "approver", "fine")

    async def audited() -> list[dict[str, object]] | None:
        rows = (await system.api.get("/api/v1/audit", params={"actor": "approver"})).json()["entries"]
        return [r for r in rows if r["event"] == "approval.decided"] or None

    row = (await eventually(audited, timeout=20, what="the decision in the audit log"))[0]
    assert row["details"]["state"] == "approved" and row["details"]["approval_id"] == shown["id"], row
    requested = (await system.api.get("/api/v1/audit", params={"event": "approval.requested"})).json()["entries"]
    assert any(r["actor"] == "agent-ok" for r in requested), requested


async def test_a_rejection_refuses_the_call_with_the_approvers_comment(system: System) -> None:
    gate = await gate_on(system)
    call = await started(gate, pending_call("agent-no"))
    shown = await waiting(system.api, "agent-no")
    rejected = await system.api.post(f"/api/v1/approvals/{shown['id']}/reject", json={"comment": "not on prod"})
    assert rejected.status_code == 200, rejected.text
    with pytest.raises(ApprovalRejected) as refused:
        await asyncio.wait_for(call, 20)
    assert refused.value.status == 403
    assert refused.value.body()["context"]["comment"] == "not on prod"
    assert "not on prod" in refused.value.detail


async def test_nobody_deciding_before_the_deadline_times_the_call_out_and_closes_it(system: System) -> None:
    gate = await gate_on(system, timeout=2.0)
    call = await started(gate, pending_call("agent-slow"))
    shown = await waiting(system.api, "agent-slow")
    with pytest.raises(ApprovalTimeout):
        await asyncio.wait_for(call, 20)
    late = await system.api.post(f"/api/v1/approvals/{shown['id']}/approve")
    assert late.status_code == 409, late.text
    assert late.json()["error_code"] == "APPROVAL_CLOSED"
    assert (await system.api.get(f"/api/v1/approvals/{shown['id']}")).json()["state"] == "expired"


async def test_a_decision_on_another_nats_connection_unblocks_the_waiting_call(system: System, nc: NATS) -> None:
    waiting_gate = await gate_on(system)
    other_replica = await gate_on(system, nc)
    call = await started(waiting_gate, pending_call("agent-far"))
    shown = await waiting(system.api, "agent-far")
    owner = Principal(key_id="owner", name="far-approver", role=Role.OWNER, namespace="default")
    await other_replica.decide(shown["id"], owner, True, None)
    await asyncio.wait_for(call, 20)


async def test_a_user_key_may_not_see_nor_approve_not_even_its_own_call(system: System) -> None:
    gate = await gate_on(system)
    user = await system.create_key("agent-self", "user")
    call = await started(gate, pending_call("agent-self"))
    shown = await waiting(system.api, "agent-self")
    async with system.client_as(user["token"]) as api:
        for response in (
            await api.post(f"/api/v1/approvals/{shown['id']}/approve"),
            await api.get("/api/v1/approvals"),
            await api.get(f"/api/v1/approvals/{shown['id']}"),
        ):
            assert response.status_code == 403, response.text
    assert not call.done()
    assert (await system.api.post(f"/api/v1/approvals/{shown['id']}/reject")).status_code == 200
    with pytest.raises(ApprovalRejected):
        await asyncio.wait_for(call, 20)


async def test_an_admin_of_another_namespace_does_not_find_it(system: System) -> None:
    gate = await gate_on(system)
    other = await system.create_key("other-admin", "admin", namespace="team-b")
    call = await started(gate, pending_call("agent-ns"))
    shown = await waiting(system.api, "agent-ns")
    async with system.client_as(other["token"]) as api:
        assert (await api.post(f"/api/v1/approvals/{shown['id']}/approve")).status_code == 404
        assert all(a["id"] != shown["id"] for a in (await api.get("/api/v1/approvals")).json()["approvals"])
    call.cancel()


async def test_deciding_twice_is_a_conflict_and_the_first_decision_stands(system: System) -> None:
    gate = await gate_on(system)
    call = await started(gate, pending_call("agent-twice"))
    shown = await waiting(system.api, "agent-twice")
    assert (await system.api.post(f"/api/v1/approvals/{shown['id']}/approve")).status_code == 200
    for verb in ("approve", "reject"):
        again = await system.api.post(f"/api/v1/approvals/{shown['id']}/{verb}")
        assert again.status_code == 409, again.text
    await asyncio.wait_for(call, 20)
    assert (await system.api.get(f"/api/v1/approvals/{shown['id']}")).json()["state"] == "approved"


async def test_a_caller_that_goes_away_withdraws_its_approval(system: System) -> None:
    gate = await gate_on(system)
    call = await started(gate, pending_call("agent-gone"))
    shown = await waiting(system.api, "agent-gone")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    async def withdrawn() -> bool:
        return (await system.api.get(f"/api/v1/approvals/{shown['id']}")).json()["state"] == "withdrawn"

    await eventually(withdrawn, timeout=20, what="the approval to be withdrawn")
    assert (await system.api.post(f"/api/v1/approvals/{shown['id']}/approve")).status_code == 409


async def test_the_arguments_are_kept_sealed_in_the_bucket(system: System, nc: NATS) -> None:
    gate = await gate_on(system)
    call = await started(gate, pending_call("agent-secret"))
    shown = await waiting(system.api, "agent-secret")
    raw = await (await nc.jetstream().key_value(APPROVALS_BUCKET)).get(shown["id"])
    assert raw.value is not None and SECRET.encode() not in raw.value
    assert b"delete_file" in raw.value
    call.cancel()


async def test_the_nats_api_lists_and_decides_approvals_with_the_same_rules(system: System, nc: NATS) -> None:
    gate = await gate_on(system)
    user = await system.create_key("nats-user", "user")
    call = await started(gate, pending_call("agent-nats"))
    shown = await waiting(system.api, "agent-nats")

    async def ask(operation: str, body: dict[str, object], token: str = ADMIN_TOKEN) -> dict[str, Any]:
        subject = OPERATIONS_BY_NAME[operation].subject
        headers = {"Authorization": f"Bearer {token}"}
        reply: dict[str, Any] = json.loads(
            (await nc.request(subject, json.dumps(body).encode(), 30, headers=headers)).data
        )
        return reply

    listed = await ask("approvals.list", {"state": "pending"})
    assert shown["id"] in [a["id"] for a in listed["result"]["approvals"]], listed
    refused = await ask("approvals.approve", {"approval_id": shown["id"]}, user["token"])
    assert refused["error"]["error_code"] == "FORBIDDEN", refused
    rejected = await ask("approvals.reject", {"approval_id": shown["id"], "comment": "over NATS"})
    assert rejected["result"]["state"] == "rejected", rejected
    with pytest.raises(ApprovalRejected, match="over NATS"):
        await asyncio.wait_for(call, 20)
    again = await ask("approvals.approve", {"approval_id": shown["id"]})
    assert again["error"]["error_code"] == "APPROVAL_CLOSED", again


async def test_an_unknown_or_malformed_id_names_no_approval(system: System) -> None:
    assert (await system.api.get(f"/api/v1/approvals/{'0' * 32}")).status_code == 404
    assert (await system.api.post(f"/api/v1/approvals/{'0' * 32}/approve")).status_code == 404
    for malformed in ("a*b", "x" * 32, "0" * 33):
        assert (await system.api.get(f"/api/v1/approvals/{malformed}")).status_code == 422, malformed


async def test_a_decision_on_another_gateway_process_unblocks_the_call(system: System) -> None:
    gate = await gate_on(system)
    call = await started(gate, pending_call("agent-process"))
    shown = await waiting(system.api, "agent-process")
    async with (
        second_gateway(system) as (_, port),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=system.api.headers, timeout=30) as b,
    ):
        decided = await b.post(f"/api/v1/approvals/{shown['id']}/approve", json={"comment": "from B"})
        assert decided.status_code == 200, decided.text
        await asyncio.wait_for(call, 20)
