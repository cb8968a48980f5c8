"""Policies on tool calls (CEL): a rule denies on every surface and the upstream never sees the call;
argument rules; redaction of results; dry runs; who may manage policies."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types
import nats
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.approval_calls import waiting
from tests.harness import ADMIN_TOKEN, System, eventually, running_system, second_gateway
from tests.mcp_client import mcp_session, text_of
from tests.mcp_raw import modern_call
from tests.peers.repo_host import read_calls

pytestmark = pytest.mark.integration
PEER = Path(__file__).resolve().parents[1] / "peers" / "repo_host.py"
CALL = "/api/v1/tools/call"
DELETE_BY_USERS = {
    "name": "no-deletes-by-users",
    "expression": 'server.name == "github" && tool.name.startsWith("delete_") && principal.role == "user"',
    "effect": "deny",
    "reason": "Users may not delete repositories",
    "namespace": "default",
}


@dataclass
class Host:
    """The running system with the repository host registered as ``github``, and its ledger."""

    system: System
    server_id: str
    ledger: Path

    def ran(self, tool: str) -> list[Any]:
        return [arguments for name, arguments in read_calls(self.ledger) if name == tool]


@pytest.fixture
async def host(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[Host]:
    (tmp_path / "ledger").mkdir()  # searchable by the sandboxed child's own uid
    ledger = tmp_path / "ledger" / "calls.log"
    ledger.touch()
    ledger.chmod(0o666)
    config = {
        "command": sys.executable,
        "args": [str(PEER)],
        "env": {"REPO_HOST_LEDGER": str(ledger)},
        "sandbox": {"paths_read_write": [str(ledger.parent)]},
    }
    async with running_system(nats_url, database_url) as system:
        created = await system.register("github", "STDIO", config)
        await system.wait_connected(created["id"])
        yield Host(system, created["id"], ledger)


async def add_policy(system: System, body: dict[str, Any]) -> dict[str, Any]:
    response = await system.api.post("/api/v1/policies", json=body)
    assert response.status_code == 201, response.text
    policy: dict[str, Any] = response.json()
    return policy


async def test_a_cel_rule_denies_deletes_by_users_on_every_surface(host: Host) -> None:
    system = host.system
    await add_policy(system, DELETE_BY_USERS)
    ops = {"name": "ops", "include": ["github.*"], "overrides": {"github.delete_repo": {"name": "cleanup"}}}
    assert (await system.api.post("/api/v1/endpoints", json=ops)).status_code == 201
    token = (await system.create_key("dev", "user"))["token"]
    async with system.client_as(token) as api:
        for body in (
            {"name": "github.delete_repo", "arguments": {"name": "a"}},
            {"name": "delete_repo", "arguments": {"name": "b"}, "server_id": host.server_id},
            {"name": "delete_repo", "arguments": {"name": "c"}},
        ):
            refused = await api.post(CALL, json=body)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error_code"] == "POLICY_DENIED"
            assert refused.json()["detail"] == "Users may not delete repositories"
        assert (await api.post(CALL, json={"name": "github.get_repo", "arguments": {"name": "a"}})).status_code == 200
        for lookalike in (
            "github.DELETE_REPO",
            "github.delete\u200b_repo",
            "github.d\u0435lete_repo",  # a Cyrillic e
            "\uff47ithub.delete_repo",  # a fullwidth g
        ):
            missed = await api.post(CALL, json={"name": lookalike, "arguments": {"name": "u"}})
            assert missed.status_code == 404, missed.text  # no other name reaches the tool
    async with mcp_session(system, token=token) as session:
        denied = await session.call_tool("github__delete_repo", {"name": "d"})
        assert denied.is_error is True and "POLICY_DENIED" in text_of(denied)
    async with mcp_session(system, token=token, mode="search") as session:
        denied = await session.call_tool("call_tool", {"name": "github.delete_repo", "arguments": {"name": "e"}})
        assert denied.is_error is True and "POLICY_DENIED" in text_of(denied)
        ran = await session.call_tool("run", {"code": 'github.delete_repo(name="f")'})
        assert "POLICY_DENIED" in text_of(ran)
    async with mcp_session(system, token=token, path="/mcp/github") as session:
        denied = await session.call_tool("delete_repo", {"name": "g"})
        assert denied.is_error is True and "POLICY_DENIED" in text_of(denied)
    async with mcp_session(system, token=token, path="/mcp/ops") as session:
        denied = await session.call_tool("cleanup", {"name": "h"})  # renamed by the bundle: still delete_repo
        assert denied.is_error is True and "POLICY_DENIED" in text_of(denied)
    nc = await nats.connect(system.settings.nats_url or "")
    try:
        body = json.dumps({"name": "github.delete_repo", "arguments": {"name": "i"}}).encode()
        headers = {"Authorization": f"Bearer {token}"}
        msg = await nc.request("toolmesh.api.v1.tools.call", body, timeout=30, headers=headers)
        reply = json.loads(msg.data)
        assert reply["ok"] is False and reply["error"]["error_code"] == "POLICY_DENIED", reply
    finally:
        await nc.close()
    assert host.ran("delete_repo") == []  # the upstream never saw a denied call
    allowed = await system.api.post(CALL, json={"name": "github.delete_repo", "arguments": {"name": "z"}})
    assert allowed.status_code == 200, allowed.text  # the owner is not a user: the rule does not match
    assert host.ran("delete_repo") == [{"name": "z"}]

    async def denial_audited() -> list[dict[str, Any]] | None:
        page = (await system.api.get("/api/v1/audit", params={"event": "tool.called", "actor": "dev"})).json()
        denied = [e for e in page["entries"] if e["details"].get("error_code") == "POLICY_DENIED"]
        return denied if len(denied) >= 3 else None

    audited = await eventually(denial_audited, timeout=15, what="the denials in the audit log")
    assert audited[0]["details"]["policy"] == "no-deletes-by-users"
    assert audited[0]["details"]["policy_effect"] == "deny"


async def test_an_argument_rule_denies_paths_under_etc_whatever_their_type(host: Host) -> None:
    system = host.system
    await add_policy(
        system,
        {
            "name": "no-etc",
            "expression": 'has(args.path) && (type(args.path) != string || args.path.startsWith("/etc"))',
            "effect": "deny",
            "reason": "Nothing under /etc",
        },
    )
    for path in ("/etc/passwd", ["/etc/passwd"], {"p": "/etc"}):
        refused = await system.api.post(CALL, json={"name": "github.read_file", "arguments": {"path": path}})
        assert refused.status_code == 403 and refused.json()["error_code"] == "POLICY_DENIED", refused.text
    ok = await system.api.post(CALL, json={"name": "github.read_file", "arguments": {"path": "/tmp/notes"}})
    assert ok.status_code == 200, ok.text
    assert host.ran("read_file") == [{"path": "/tmp/notes"}]


async def test_a_deny_rule_that_fails_on_an_odd_type_refuses_the_call(host: Host) -> None:
    """``args.path.startsWith`` on a list or a number cannot be evaluated: a deny rule then fails closed,
    so a caller cannot slip past it by sending another type; a call without ``path`` is not its concern."""
    system = host.system
    await add_policy(system, {"name": "naive", "expression": 'args.path.startsWith("/etc")', "effect": "deny"})
    for path in ("/etc/x", ["/etc/x"], 7):
        refused = await system.api.post(CALL, json={"name": "github.read_file", "arguments": {"path": path}})
        assert refused.status_code == 403 and refused.json()["error_code"] == "POLICY_DENIED", refused.text
    absent = await system.api.post(CALL, json={"name": "github.get_repo", "arguments": {"name": "toolmesh"}})
    assert absent.status_code == 200 and not absent.json()["isError"], absent.text
    assert (host.ran("read_file"), host.ran("get_repo")) == ([], [{"name": "toolmesh"}])


async def test_arguments_that_are_not_an_object_are_refused_on_the_transparent_path(host: Host) -> None:
    """What the policies see is what the upstream would get: a list of arguments is refused by the
    gateway's MCP server (invalid params) before any policy or upstream."""
    system = host.system
    await add_policy(system, {"name": "no-etc", "expression": 'args.path.startsWith("/etc")', "effect": "deny"})
    url = f"{system.api.base_url}/mcp/github"
    answer = await modern_call(
        url, "tools/call", {"name": "read_file", "arguments": ["/etc/passwd"]}, token=ADMIN_TOKEN
    )
    assert answer["error"]["code"] == -32602, answer
    assert host.ran("read_file") == []


async def test_a_redaction_rule_removes_fields_from_results(host: Host) -> None:
    system = host.system
    await add_policy(
        system,
        {
            "name": "hide-secrets",
            "expression": 'tool.name == "get_repo"',
            "effect": "redact",
            "redact": ["owner.email", "deploy_token"],
        },
    )
    response = await system.api.post(CALL, json={"name": "github.get_repo", "arguments": {"name": "a"}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["structuredContent"] == {"name": "a", "owner": {"login": "octo"}}
    assert "octo@example.com" not in json.dumps(body) and "tok-123" not in json.dumps(body)
    for path in ("/mcp", "/mcp/github"):
        async with mcp_session(system, path=path) as session:
            name = "github__get_repo" if path == "/mcp" else "get_repo"
            result = await session.call_tool(name, {"name": "b"})
            assert result.structured_content == {"name": "b", "owner": {"login": "octo"}}
            assert "octo@example.com" not in text_of(result) and "tok-123" not in text_of(result)


async def test_a_dry_run_rule_is_audited_and_does_not_deny(host: Host) -> None:
    system = host.system
    await add_policy(system, {**DELETE_BY_USERS, "mode": "dry_run"})
    token = (await system.create_key("dev", "user"))["token"]
    async with system.client_as(token) as api:
        ran = await api.post(CALL, json={"name": "github.delete_repo", "arguments": {"name": "a"}})
        assert ran.status_code == 200, ran.text
    assert host.ran("delete_repo") == [{"name": "a"}]

    async def noted() -> dict[str, Any] | None:
        page = (await system.api.get("/api/v1/audit", params={"event": "tool.called", "actor": "dev"})).json()
        return next((e for e in page["entries"] if e["details"].get("policy")), None)

    entry = await eventually(noted, timeout=15, what="the dry run in the audit log")
    assert entry["details"]["policy_effect"] == "dry_run:deny" and entry["details"]["outcome"] == "ok"


async def test_a_call_a_policy_holds_waits_for_an_approval_and_a_rejection_refuses_it(host: Host) -> None:
    system = host.system
    await add_policy(
        system,
        {
            "name": "destructive-needs-approval",
            "expression": "has(tool.annotations.destructiveHint) && tool.annotations.destructiveHint == true",
            "effect": "require_approval",
            "reason": "Destructive tools need a human's approval",
        },
    )
    token = (await system.create_key("dev", "user"))["token"]
    async with system.client_as(token) as api:
        call = asyncio.create_task(api.post(CALL, json={"name": "github.delete_repo", "arguments": {"name": "a"}}))
        shown = await waiting(system.api, "dev")
        assert (shown["tool"], shown["reason"]) == ("delete_repo", "Destructive tools need a human's approval")
        assert host.ran("delete_repo") == []  # held before the upstream
        assert (await system.api.post(f"/api/v1/approvals/{shown['id']}/approve", json={})).status_code == 200
        approved = await call
        assert approved.status_code == 200 and approved.json()["isError"] is False, approved.text
        call = asyncio.create_task(api.post(CALL, json={"name": "github.delete_repo", "arguments": {"name": "b"}}))
        shown = await waiting(system.api, "dev")
        assert (await system.api.post(f"/api/v1/approvals/{shown['id']}/reject", json={})).status_code == 200
        rejected = await call
        assert rejected.status_code == 403 and rejected.json()["error_code"] == "APPROVAL_REJECTED", rejected.text
        assert (await api.post(CALL, json={"name": "github.get_repo", "arguments": {"name": "c"}})).status_code == 200
    await add_policy(system, {"name": "owners-may", "expression": 'principal.role == "owner"', "effect": "allow"})
    ran = await system.api.post(CALL, json={"name": "github.delete_repo", "arguments": {"name": "d"}})
    assert ran.status_code == 200 and ran.json()["isError"] is False, ran.text  # an allow overrides the approval
    assert host.ran("delete_repo") == [{"name": "a"}, {"name": "d"}]


async def test_a_policy_written_on_one_gateway_applies_on_another_at_once(host: Host) -> None:
    """Replica B (its own process) applies a policy written through replica A as soon as the event
    reaches it, and a deletion too: no restart, no database read per call."""
    system = host.system
    async with second_gateway(system) as (_, port_b):
        b = f"http://127.0.0.1:{port_b}"
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=b, headers=headers, timeout=30) as replica:
            call = {"name": "github.delete_repo", "arguments": {"name": "r"}}
            assert (await replica.post(CALL, json=call)).status_code == 200
            rule = {"name": "no-deletes", "expression": 'tool.name == "delete_repo"', "effect": "deny", "reason": "No"}
            created = await add_policy(system, rule)

            async def denied_on_b() -> bool:
                return (await replica.post(CALL, json=call)).status_code == 403

            await eventually(denied_on_b, timeout=10, what="replica B to apply the policy")
            assert (await system.api.delete(f"/api/v1/policies/{created['id']}")).status_code == 204

            async def allowed_on_b() -> bool:
                return (await replica.post(CALL, json=call)).status_code == 200

            await eventually(allowed_on_b, timeout=10, what="replica B to drop the policy")
    assert host.ran("delete_repo") == [{"name": "r"}, {"name": "r"}]


@pytest.mark.parametrize(("action", "runs"), [("accept", True), ("decline", False)])
async def test_on_mcp_the_clients_user_approves_a_held_call_through_elicitation(
    host: Host, action: str, runs: bool
) -> None:
    system = host.system
    await add_policy(
        system,
        {
            "name": "destructive-needs-approval",
            "expression": "has(tool.annotations.destructiveHint) && tool.annotations.destructiveHint == true",
            "effect": "require_approval",
            "reason": "Destructive tools need a human's approval",
        },
    )
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action=action, content={} if action == "accept" else None)  # type: ignore[arg-type]

    url = f"http://{system.settings.host}:{system.settings.port}/mcp"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=answer) as session,
    ):
        await session.initialize()
        result = await session.call_tool("github__delete_repo", {"name": "e"})
    assert len(asked) == 1 and "delete_repo" in asked[0], asked
    assert result.is_error is not runs, text_of(result)
    assert host.ran("delete_repo") == ([{"name": "e"}] if runs else [])
    if not runs:
        assert "APPROVAL_REJECTED" in text_of(result)


@pytest.mark.parametrize(("action", "runs"), [("accept", True), ("decline", False)])
async def test_a_2026_client_approves_a_held_call_as_an_input_request_in_its_retry(
    host: Host, action: str, runs: bool
) -> None:
    """The stateless era: the call a policy holds answers with the question as an input request, and
    the client's retry carrying its user's answer decides it."""
    system = host.system
    await add_policy(
        system,
        {
            "name": "destructive-needs-approval",
            "expression": "has(tool.annotations.destructiveHint) && tool.annotations.destructiveHint == true",
            "effect": "require_approval",
            "reason": "Destructive tools need a human's approval",
        },
    )
    url, elicits = f"{system.api.base_url}/mcp", {"elicitation": {}}
    call = {"name": "github__delete_repo", "arguments": {"name": "m"}}
    asked = (await modern_call(url, "tools/call", call, token=ADMIN_TOKEN, capabilities=elicits))["result"]
    assert asked["resultType"] == "input_required", asked
    ((key, question),) = asked["inputRequests"].items()
    assert question["method"] == "elicitation/create" and "delete_repo" in question["params"]["message"], question
    assert host.ran("delete_repo") == []  # held before the upstream
    retry = {**call, "requestState": asked["requestState"], "inputResponses": {key: {"action": action}}}
    done = await modern_call(url, "tools/call", retry, token=ADMIN_TOKEN, capabilities=elicits)
    assert done["result"].get("isError", False) is not runs, done
    assert host.ran("delete_repo") == ([{"name": "m"}] if runs else [])
    if not runs:
        assert "APPROVAL_REJECTED" in json.dumps(done), done
