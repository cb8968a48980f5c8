"""The client's user decides an approval through elicitation, in both protocol eras: a handshake-era
(2025) MCP client session on ``/mcp`` that declared elicitation gets an ``elicitation/create``
request; a 2026-07-28 client whose call is in flight gets the question as an input request of an
``InputRequiredResult`` and answers it in its retry. Its answer decides."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx2
import mcp_types
import pytest
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tests.approval_calls import gate_on, pending_call, started, waiting
from tests.harness import ADMIN_TOKEN, System, eventually
from tests.mcp_raw import modern_post
from tests.peers.launch import launch_peer
from toolmesh.contracts.rpc import ClientRef
from toolmesh.errors import ApprovalRejected
from toolmesh_gateway.front_door.client_links import ClientLinks


class User:
    """The person behind the MCP client: answers every question with ``action`` and keeps them."""

    def __init__(self, action: Literal["accept", "decline", "cancel"]) -> None:
        self.action = action
        self.asked: list[str] = []

    async def answer(self, context: ClientRequestContext, params: Any) -> mcp_types.ElicitResult:
        self.asked.append(params.message)
        return mcp_types.ElicitResult(action=self.action, content={} if self.action == "accept" else None)


async def session_of(system: System, user: User) -> AsyncIterator[ClientRef]:
    """A 2025 client session on ``/mcp`` with elicitation, and its bus reference (the link the gateway
    made for it when it set its log level: the running gateway's ``ClientLinks`` know it)."""
    url = f"http://{system.settings.host}:{system.settings.port}/mcp"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=user.answer) as session,
    ):
        started_session = await session.initialize()
        assert started_session.protocol_version not in MODERN_PROTOCOL_VERSIONS, started_session
        await session.set_logging_level("info")
        links = next(o for o in gc.get_objects() if isinstance(o, ClientLinks) and o._sub is not None)
        ref = next(link.ref for link in links._links.values() if not link.detached)
        assert ref.elicitation, ref
        yield ref


@pytest.mark.parametrize(("action", "approved"), [("accept", True), ("decline", False), ("cancel", False)])
async def test_the_clients_user_decides_through_elicitation(
    system: System, action: Literal["accept", "decline", "cancel"], approved: bool
) -> None:
    gate = await gate_on(system)
    user = User(action)
    async for ref in session_of(system, user):
        call = await started(gate, pending_call(f"agent-{action}", client=ref))
        if approved:
            await asyncio.wait_for(call, 30)
        else:
            with pytest.raises(ApprovalRejected):
                await asyncio.wait_for(call, 30)
    assert len(user.asked) == 1, user.asked
    assert "files.delete_file" in user.asked[0] and "/srv/data/report.csv" in user.asked[0], user.asked
    assert "delete_file is destructive" in user.asked[0]
    listed = (await system.api.get("/api/v1/approvals")).json()["approvals"]
    decided = next(a for a in listed if a["caller"] == f"agent-{action}")
    assert decided["state"] == ("approved" if approved else "rejected")
    assert decided["decided_by"] == f"client:agent-{action}"


async def test_without_an_answer_from_the_client_an_approver_decides(system: System) -> None:
    gate = await gate_on(system)
    gone = ClientRef(id="0123456789ab.no-such-session", elicitation=True)
    call = await started(gate, pending_call("agent-nobody", client=gone))
    shown = await waiting(system.api, "agent-nobody")
    assert (await system.api.post(f"/api/v1/approvals/{shown['id']}/approve")).status_code == 200
    await asyncio.wait_for(call, 30)


def detached_ref() -> ClientRef | None:
    """The bus reference of the 2026-07-28 request in flight (the gateway's link of its call)."""
    for links in (o for o in gc.get_objects() if isinstance(o, ClientLinks) and o._sub is not None):
        for link in list(links._links.values()):
            if link.detached:
                return link.ref
    return None


async def test_a_2026_client_answers_the_question_in_its_retry(system: System) -> None:
    """While the client's ``demo__slow`` call runs, the gate asks its user: the call answers with the
    question as an input request; the retry accepting it approves, then brings the tool's result."""
    gate = await gate_on(system)
    url = f"http://{system.settings.host}:{system.settings.port}/mcp"
    params = {"name": "demo__slow", "arguments": {"seconds": 8}}  # long enough to be asked while it runs
    async with launch_peer("http") as peer:
        body = {"name": "demo", "transport_type": peer.transport_type, "connection_config": peer.config}
        created = await system.api.post("/api/v1/aggregator/servers", json={**body, "allow_insecure": True})
        assert created.status_code == 201, created.text
        await system.wait_connected(created.json()["id"])
        first = asyncio.create_task(
            modern_post(url, "tools/call", params, token=ADMIN_TOKEN, capabilities={"elicitation": {}})
        )
        ref = await eventually(detached_ref, timeout=20, what="the call's link")
        assert ref.elicitation, ref
        call = await started(gate, pending_call("agent-modern", client=ref))
        answer = (await asyncio.wait_for(first, 30)).json()["result"]
        assert answer["resultType"] == "input_required", answer
        ((key, asked),) = answer["inputRequests"].items()
        assert asked["method"] == "elicitation/create" and "files.delete_file" in asked["params"]["message"], asked
        retry = {**params, "requestState": answer["requestState"], "inputResponses": {key: {"action": "accept"}}}
        response = await modern_post(url, "tools/call", retry, token=ADMIN_TOKEN, capabilities={"elicitation": {}})
        await asyncio.wait_for(call, 30)
        assert "result" in response.json() and not response.json()["result"].get("isError"), response.text
    listed = (await system.api.get("/api/v1/approvals")).json()["approvals"]
    decided = next(a for a in listed if a["caller"] == "agent-modern")
    assert (decided["state"], decided["decided_by"]) == ("approved", "client:agent-modern"), decided


class SilentUser(User):
    """A user who never answers (until the question is taken back)."""

    def __init__(self) -> None:
        super().__init__("accept")
        self.withdrawn = asyncio.Event()

    async def answer(self, context: ClientRequestContext, params: Any) -> mcp_types.ElicitResult:
        self.asked.append(params.message)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.withdrawn.set()
            raise
        raise AssertionError("never answered")


async def test_an_approvers_decision_takes_the_question_back_from_the_client(system: System) -> None:
    gate = await gate_on(system)
    user = SilentUser()
    async for ref in session_of(system, user):
        call = await started(gate, pending_call("agent-silent", client=ref))
        shown = await waiting(system.api, "agent-silent")
        await eventually(lambda: user.asked, timeout=20, what="the user to be asked")
        assert (await system.api.post(f"/api/v1/approvals/{shown['id']}/approve")).status_code == 200
        await asyncio.wait_for(call, 30)
        await asyncio.wait_for(user.withdrawn.wait(), 20)
