"""Pending calls for approval tests: a gate of the test's own beside the running gateway's (another
``Approvals`` on the same bucket, as another replica would have), and calls waiting in it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
from nats.aio.client import Client as NATS

from tests.harness import System, credential_box, eventually
from toolmesh.contracts.keys import Role
from toolmesh.contracts.rpc import ClientRef
from toolmesh.platform.bus.topology import approvals_bucket
from toolmesh_gateway.app import APPROVALS_KEPT_SECONDS
from toolmesh_gateway.approval_requests import PendingCall
from toolmesh_gateway.approvals.gate import Approvals
from toolmesh_gateway.approvals.records import ApprovalRecords
from toolmesh_gateway.auth import Caller, Principal

SECRET = "sk-live-do-not-show-0042"


async def gate_on(system: System, nc: NATS | None = None, timeout: float = 300.0) -> Approvals:
    """An ``Approvals`` on ``nc`` (the system's own connection when None), waiting ``timeout`` seconds."""
    js = (nc or system.backends.nc).jetstream()
    kv = await approvals_bucket(js, APPROVALS_KEPT_SECONDS)
    return Approvals(ApprovalRecords(kv, credential_box(system.settings)), js, system.backends.bus, timeout)


def pending_call(caller: str = "agent-7", namespace: str = "default", client: ClientRef | None = None) -> PendingCall:
    """A call of ``caller`` to ``files.delete_file`` that a policy puts before a human."""
    principal = Principal(key_id=uuid.uuid4().hex, name=caller, role=Role.USER, namespace=namespace)
    return PendingCall(
        caller=Caller(principal),
        namespace=namespace,
        server_id=str(uuid.uuid4()),
        server_name="files",
        tool="delete_file",
        arguments={"path": "/srv/data/report.csv", "token": SECRET},
        policy="destructive-needs-approval",
        reason="delete_file is destructive",
        surface="mcp" if client else "rest",
        client=client,
    )


async def waiting(api: httpx.AsyncClient, caller: str) -> dict[str, Any]:
    """The pending approval of ``caller``, once the API lists it."""

    async def probe() -> dict[str, Any] | None:
        response = await api.get("/api/v1/approvals", params={"state": "pending"})
        assert response.status_code == 200, response.text
        return next((a for a in response.json()["approvals"] if a["caller"] == caller), None)

    return await eventually(probe, timeout=20, what=f"the approval of {caller} to be listed")


async def started(gate: Approvals, call: PendingCall) -> asyncio.Task[None]:
    """``gate.approve(call)`` running in a task of its own."""
    return asyncio.create_task(gate.approve(call))
