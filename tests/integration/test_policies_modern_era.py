"""Policies on the ``/mcp`` path that relays a 2026-07-28 client's call itself (an upstream that speaks
only that era): denied before the upstream, redacted after it, held for an approval once per call,
like every other surface; and on ``/mcp/{server}``, whose 2026-07-28 calls to a handshake-era
upstream go through the ``InputBridge``: held once too, whatever rounds of questions follow."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.approval_calls import waiting
from tests.harness import ADMIN_TOKEN, System, running_system
from tests.mcp_raw import modern_call
from tests.peers.launch import free_port, running_process
from tests.tasks_client import task_tools_system

pytestmark = pytest.mark.integration
MODERN_ONLY = Path(__file__).parents[1] / "peers" / "modern_only.py"
APPROVAL_TIMEOUT = 20.0
"""The approval deadline here: a call asked twice would wait this long and fail, rather than 300 s."""


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    port = free_port()
    async with (
        running_system(nats_url, database_url, approval_timeout_seconds=APPROVAL_TIMEOUT) as running,
        running_process([sys.executable, str(MODERN_ONLY), "--port", str(port)], port=port),
    ):
        config = {"base_url": f"http://127.0.0.1:{port}/mcp", "headers": {}}
        created = await running.register("modern", "HTTP", config, allow_insecure=True, new_tools="auto")
        await running.wait_connected(created["id"])
        yield running


async def test_a_relayed_modern_call_is_denied_by_a_policy(system: System) -> None:
    url = f"{system.api.base_url}/mcp"
    before = await modern_call(
        url, "tools/call", {"name": "modern__echo", "arguments": {"text": "hi"}}, token=ADMIN_TOKEN
    )
    assert "echo: hi" in json.dumps(before), before
    policy = {"name": "no-echo", "expression": 'tool.name == "echo"', "effect": "deny", "reason": "No echoes"}
    assert (await system.api.post("/api/v1/policies", json=policy)).status_code == 201
    after = await modern_call(
        url, "tools/call", {"name": "modern__echo", "arguments": {"text": "hi"}}, token=ADMIN_TOKEN
    )
    assert "POLICY_DENIED" in json.dumps(after) and "echo: hi" not in json.dumps(after), after


@pytest.mark.parametrize(("path", "tool"), [("/mcp", "modern__confirm"), ("/mcp/modern", "confirm")])
async def test_a_relayed_call_a_policy_holds_is_approved_once_for_all_its_input_rounds(
    system: System, path: str, tool: str
) -> None:
    """The client's user is asked first, as an input request; the upstream asks its own question after
    the approval: the client's retry carries the answer back, and nobody is asked again."""
    rule = {"name": "confirm-needs-approval", "expression": 'tool.name == "confirm"', "effect": "require_approval"}
    assert (await system.api.post("/api/v1/policies", json={**rule, "reason": "Asks first"})).status_code == 201
    token = (await system.create_key("dev", "user"))["token"]
    url, call = f"{system.api.base_url}{path}", {"name": tool, "arguments": {"action": "ship"}}
    elicits = {"elicitation": {}}
    held = (await modern_call(url, "tools/call", call, token=token, capabilities=elicits))["result"]
    ((key, question),) = held["inputRequests"].items()
    assert "Allow modern.confirm to run?" in question["params"]["message"], question
    retry = {**call, "inputResponses": {key: {"action": "accept"}}, "requestState": held["requestState"]}
    asked = (await modern_call(url, "tools/call", retry, token=token, capabilities=elicits))["result"]
    assert asked["resultType"] == "input_required", asked
    ((key, question),) = asked["inputRequests"].items()
    assert question["method"] == "elicitation/create" and "Allow" not in json.dumps(question), question
    retry = {**call, "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}
    retry["requestState"] = asked["requestState"]
    done = await modern_call(url, "tools/call", retry, token=token, capabilities=elicits)
    assert done.get("result", {}).get("content", [{}])[0].get("text") == "did ship", done
    approvals = (await system.api.get("/api/v1/approvals")).json()["approvals"]
    assert [(a["caller"], a["state"], a["decided_by"]) for a in approvals] == [("dev", "approved", "client:dev")]


@pytest.mark.parametrize(("path", "prefix"), [("/mcp", "modern__"), ("/mcp/modern", "")])
async def test_a_relayed_call_the_clients_user_declines_never_reaches_the_upstream(
    system: System, path: str, prefix: str
) -> None:
    rule = {"name": "counts-need-approval", "expression": 'tool.name == "counted"', "effect": "require_approval"}
    assert (await system.api.post("/api/v1/policies", json={**rule, "reason": "Asks first"})).status_code == 201
    url, call = f"{system.api.base_url}{path}", {"name": f"{prefix}counted", "arguments": {"label": "no"}}
    elicits = {"elicitation": {}}
    held = (await modern_call(url, "tools/call", call, token=ADMIN_TOKEN, capabilities=elicits))["result"]
    ((key, _),) = held["inputRequests"].items()
    retry = {**call, "inputResponses": {key: {"action": "decline"}}, "requestState": held["requestState"]}
    refused = (await modern_call(url, "tools/call", retry, token=ADMIN_TOKEN, capabilities=elicits))["result"]
    assert refused.get("isError") and "APPROVAL_REJECTED" in json.dumps(refused), refused
    runs = {"name": f"{prefix}runs", "arguments": {"label": "no"}}
    counted = await modern_call(url, "tools/call", runs, token=ADMIN_TOKEN)
    assert counted["result"]["content"][0]["text"] == "0", counted


async def test_a_retry_whose_state_says_nothing_of_an_approval_is_held(system: System) -> None:
    """Only a state sealed after an approval spares its retry one: a call started before the policy
    existed is held in its retry, and refused when the approver rejects it."""
    token = (await system.create_key("dev", "user"))["token"]
    url, call = f"{system.api.base_url}/mcp", {"name": "modern__confirm", "arguments": {"action": "wipe"}}
    elicits = {"elicitation": {}}
    asked = (await modern_call(url, "tools/call", call, token=token, capabilities=elicits))["result"]
    assert asked["resultType"] == "input_required", asked
    rule = {"name": "confirm-needs-approval", "expression": 'tool.name == "confirm"', "effect": "require_approval"}
    assert (await system.api.post("/api/v1/policies", json={**rule, "reason": "Asks first"})).status_code == 201
    ((key, _),) = asked["inputRequests"].items()
    retry = {**call, "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}
    retry["requestState"] = asked["requestState"]
    retried = asyncio.create_task(modern_call(url, "tools/call", retry, token=token, capabilities=elicits))
    shown = await waiting(system.api, "dev")
    assert (await system.api.post(f"/api/v1/approvals/{shown['id']}/reject", json={})).status_code == 200
    refused = json.dumps(await retried)
    assert "APPROVAL_REJECTED" in refused and "did wipe" not in refused, refused


@pytest.mark.parametrize(("action", "runs"), [("accept", True), ("decline", False)])
async def test_on_the_transparent_path_the_clients_user_approves_a_held_call_in_its_retry(
    nats_url: str, database_url: str, action: str, runs: bool
) -> None:
    """``tasks.confirm_delete`` (a handshake-era upstream) relayed to a 2026-07-28 client on ``/mcp/tasks``:
    the approval's question is the first input request, the user's answer in the retry decides it, and
    the upstream's own question after an approval is not followed by a second approval."""
    async with task_tools_system(nats_url, database_url, approval_timeout_seconds=APPROVAL_TIMEOUT) as system:
        rule = {"name": "deletes-need-approval", "expression": 'tool.name == "confirm_delete"'}
        rule |= {"effect": "require_approval", "reason": "Asks first"}
        assert (await system.api.post("/api/v1/policies", json=rule)).status_code == 201
        token = (await system.create_key("dev", "user"))["token"]
        url, call = f"{system.api.base_url}/mcp/tasks", {"name": "confirm_delete", "arguments": {"filename": "f"}}
        elicits = {"elicitation": {}}
        held = (await modern_call(url, "tools/call", call, token=token, capabilities=elicits))["result"]
        assert held["resultType"] == "input_required", held
        ((key, question),) = held["inputRequests"].items()
        assert "Allow tasks.confirm_delete to run?" in question["params"]["message"], question
        retry = {**call, "inputResponses": {key: {"action": action}}, "requestState": held["requestState"]}
        answered = (await modern_call(url, "tools/call", retry, token=token, capabilities=elicits))["result"]
        approvals = (await system.api.get("/api/v1/approvals")).json()["approvals"]
        decided = "approved" if runs else "rejected"
        assert [(a["state"], a["decided_by"]) for a in approvals] == [(decided, "client:dev")], approvals
        if not runs:
            assert answered.get("isError") and "APPROVAL_REJECTED" in json.dumps(answered), answered
            return
        ((key, question),) = answered["inputRequests"].items()
        assert "Delete f?" in json.dumps(question), question
        retry = {**call, "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}
        retry["requestState"] = answered["requestState"]
        done = await modern_call(url, "tools/call", retry, token=token, capabilities=elicits)
        assert done.get("result", {}).get("content", [{}])[0].get("text") == "deleted f", done
        assert len((await system.api.get("/api/v1/approvals")).json()["approvals"]) == 1


async def test_on_the_transparent_path_an_approval_question_is_answered_by_its_caller_only(
    nats_url: str, database_url: str
) -> None:
    """Another principal presenting the state of a held call cannot approve it: ``-32602``, and the
    approval stays pending (an approver then decides it)."""
    async with task_tools_system(nats_url, database_url, approval_timeout_seconds=APPROVAL_TIMEOUT) as system:
        rule = {"name": "deletes-need-approval", "expression": 'tool.name == "confirm_delete"'}
        rule |= {"effect": "require_approval", "reason": "Asks first"}
        assert (await system.api.post("/api/v1/policies", json=rule)).status_code == 201
        token = (await system.create_key("dev", "user"))["token"]
        other = (await system.create_key("mallory", "user"))["token"]
        url, call = f"{system.api.base_url}/mcp/tasks", {"name": "confirm_delete", "arguments": {"filename": "f"}}
        elicits = {"elicitation": {}}
        held = (await modern_call(url, "tools/call", call, token=token, capabilities=elicits))["result"]
        ((key, _),) = held["inputRequests"].items()
        retry = {**call, "inputResponses": {key: {"action": "accept"}}, "requestState": held["requestState"]}
        replayed = await modern_call(url, "tools/call", retry, token=other, capabilities=elicits)
        assert replayed.get("error", {}).get("code") == -32602, replayed
        shown = await waiting(system.api, "dev")
        assert shown["state"] == "pending" and shown["decided_by"] is None, shown


async def test_a_relayed_call_approved_in_a_retry_runs_though_it_logs_after_its_first_request_ended(
    system: System,
) -> None:
    """``shout`` logs before it answers: the call approved in the retry runs on after the request that
    started it was answered, and its log notification does not break it."""
    rule = {"name": "shouts-need-approval", "expression": 'tool.name == "shout"', "effect": "require_approval"}
    assert (await system.api.post("/api/v1/policies", json={**rule, "reason": "Asks first"})).status_code == 201
    url, call = f"{system.api.base_url}/mcp/modern", {"name": "shout", "arguments": {"text": "hey"}}
    elicits = {"elicitation": {}}
    held = (await modern_call(url, "tools/call", call, token=ADMIN_TOKEN, capabilities=elicits))["result"]
    ((key, _),) = held["inputRequests"].items()
    retry = {**call, "inputResponses": {key: {"action": "accept"}}, "requestState": held["requestState"]}
    done = await modern_call(url, "tools/call", retry, token=ADMIN_TOKEN, capabilities=elicits)
    assert done.get("result", {}).get("content", [{}])[0].get("text") == "shouted", done
