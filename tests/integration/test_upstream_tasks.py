"""Tasks an upstream runs itself are passed through, on any replica, to their starter only.

``tests/peers/upstream_tasks.py`` declares the Tasks extension and runs its own tasks. Replica A (the
test's own) and replica B (a ``toolmesh gateway`` process) share the bucket of tasks: a task the
upstream created through one is read, answered and cancelled through the other, under an id of the
gateway's (the upstream's never reaches the client); another principal gets the ``-32602`` of a task
that does not exist; and what a hostile upstream answers (a task id no one should keep, a status the
extension has not, fields a task has not) never reaches the client as it is, nor a result field a
``redact`` policy removes. A
key's passed-through tasks count toward ``TOOLMESH_TASK_MAX_PER_KEY`` like the gateway's own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.harness import ADMIN_TOKEN, System, eventually, second_gateway
from tests.mcp_raw import modern_call
from tests.tasks_client import ASKING, TASKS, ended_task, get_task, task_tools_system, upstream_tasks_registered

pytestmark = pytest.mark.integration
ENDPOINT = "/mcp/upstream-tasks"


@dataclass
class Replicas:
    system: System
    port_b: int

    def a(self, path: str = ENDPOINT) -> str:
        return f"http://127.0.0.1:{self.system.settings.port}{path}"

    def b(self, path: str = ENDPOINT) -> str:
        return f"http://127.0.0.1:{self.port_b}{path}"


@pytest.fixture
async def replicas(nats_url: str, database_url: str) -> AsyncIterator[Replicas]:
    async with (
        task_tools_system(nats_url, database_url) as system,
        upstream_tasks_registered(system),
        second_gateway(system) as (_, port_b),
    ):
        yield Replicas(system, port_b)


async def _call(url: str, name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return await modern_call(
        url, "tools/call", {"name": name, "arguments": arguments, **params}, token=ADMIN_TOKEN, capabilities=ASKING
    )


async def _created(url: str, name: str, arguments: dict[str, Any], **params: Any) -> str:
    answer = await _call(url, name, arguments, **params)
    assert answer.get("result", {}).get("resultType") == "task", answer
    assert "upstream-" not in json.dumps(answer), answer  # the upstream's own task id stays with the gateway
    task_id: str = answer["result"]["taskId"]
    return task_id


async def test_a_task_the_upstream_runs_is_served_by_every_replica(replicas: Replicas) -> None:
    task_id = await _created(replicas.a(), "slow_task", {"seconds": 3600, "label": "long"})
    working = await get_task(replicas.b(), task_id)
    assert working["result"]["status"] == "working" and working["result"]["taskId"] == task_id, working
    cancel = await modern_call(replicas.b(), "tasks/cancel", {"taskId": task_id}, token=ADMIN_TOKEN, capabilities=TASKS)
    assert cancel["result"]["resultType"] == "complete" and "status" not in cancel["result"], cancel
    assert (await get_task(replicas.a(), task_id))["result"]["status"] == "cancelled"

    done = await _created(replicas.b(), "slow_task", {"seconds": 0.2, "label": "short"})
    ended = await ended_task(replicas.a(), done)
    assert ended["status"] == "completed" and ended["result"]["content"][0]["text"] == "done short", ended


async def test_input_gathered_before_and_during_an_upstream_task(replicas: Replicas) -> None:
    """``InputRequiredResult`` first (its ``requestState`` sealed by the gateway), then a task on the
    retry through the other replica; a task asking its client is answered through ``tasks/update``."""
    asked = (await _call(replicas.a(), "test_tool_with_task", {}))["result"]
    assert asked["resultType"] == "input_required" and "taskId" not in asked, asked
    key = next(iter(asked["inputRequests"]))
    answer = {key: {"action": "accept", "content": {"name": "Alice"}}}
    task_id = await _created(
        replicas.b(), "test_tool_with_task", {}, inputResponses=answer, requestState=asked["requestState"]
    )
    ended = await ended_task(replicas.a(), task_id)
    assert ended["result"]["content"][0]["text"] == "Hello, Alice!", ended

    confirm = await _created(replicas.a("/mcp"), "upstream-tasks__confirm_task", {})
    waiting = (await get_task(replicas.b("/mcp"), confirm))["result"]
    assert waiting["status"] == "input_required" and "confirm" in waiting["inputRequests"], waiting
    responses = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    params = {"taskId": confirm, "inputResponses": responses}
    updated = await modern_call(replicas.b("/mcp"), "tasks/update", params, token=ADMIN_TOKEN, capabilities=TASKS)
    assert updated["result"]["resultType"] == "complete", updated
    assert (await ended_task(replicas.a("/mcp"), confirm))["result"]["content"][0]["text"] == "confirmed"


async def test_an_upstream_task_is_its_starters_only(replicas: Replicas) -> None:
    task_id = await _created(replicas.a(), "slow_task", {"seconds": 3600, "label": "mine"})
    other = (await replicas.system.create_key("other", "agent"))["token"]
    for method, params in (
        ("tasks/get", {"taskId": task_id}),
        ("tasks/cancel", {"taskId": task_id}),
        ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
    ):
        foreign = await modern_call(replicas.b(), method, params, token=other, capabilities=TASKS)
        assert foreign["error"]["code"] == -32602 and foreign["error"]["message"] == "Unknown task", foreign
    assert (await get_task(replicas.a(), task_id))["result"]["status"] == "working"


async def test_a_hostile_upstreams_tasks_are_screened(replicas: Replicas) -> None:
    for kind in ("long-id", "number-id"):
        refused = await _call(replicas.a(), "hostile", {"kind": kind})
        assert refused["error"]["code"] == -32603 and "usable taskId" in refused["error"]["message"], refused

    bad = await _created(replicas.a(), "hostile", {"kind": "bad-status"})
    broken = await get_task(replicas.b(), bad)
    assert broken["error"]["code"] == -32603 and "status" in broken["error"]["message"], broken

    leaky = await _created(replicas.a(), "hostile", {"kind": "leaky"})
    task = (await get_task(replicas.b(), leaky))["result"]
    assert task["taskId"] == leaky, task
    allowed = {
        "_meta",
        "resultType",
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
        "result",
    }
    assert set(task) <= allowed, task  # no requestState, no field of its own, no status message past bounds
    assert task["status"] == "completed" and task["result"]["content"][0]["text"] == "leaked", task


async def test_an_upstream_tasks_result_too_large_to_relay_is_an_error(replicas: Replicas) -> None:
    huge = await _created(replicas.a(), "hostile", {"kind": "huge"})

    async def refused() -> dict[str, Any] | None:
        answer = await get_task(replicas.b(), huge)
        return answer if "error" in answer else None

    error = (await eventually(refused, what="the huge result to be refused"))["error"]
    assert "byte limit" in error["message"], error
    fine = await _created(replicas.a(), "slow_task", {"seconds": 0, "label": "after"})
    assert (await ended_task(replicas.b(), fine))["result"]["content"][0]["text"] == "done after"


async def test_a_keys_passed_through_tasks_count_toward_its_task_limit(nats_url: str, database_url: str) -> None:
    """Past ``TOOLMESH_TASK_MAX_PER_KEY`` tasks an upstream runs for a key, the key's next task-asking call is
    refused with ``LIMIT_EXCEEDED`` before it reaches the upstream; a task seen to end makes room again, and
    a call the upstream answers without a task holds no room."""
    async with (
        task_tools_system(nats_url, database_url, task_max_per_key=2) as system,
        upstream_tasks_registered(system),
    ):
        url = f"http://127.0.0.1:{system.settings.port}{ENDPOINT}"
        held = [await _created(url, "slow_task", {"seconds": 3600, "label": f"held {n}"}) for n in range(2)]
        refused = await _call(url, "slow_task", {"seconds": 3600, "label": "one too many"})
        assert refused["error"]["data"]["error_code"] == "LIMIT_EXCEEDED", refused
        assert refused["error"]["data"]["context"] == {"task_max_per_key": 2}, refused

        cancel = await modern_call(url, "tasks/cancel", {"taskId": held[0]}, token=ADMIN_TOKEN, capabilities=TASKS)
        assert cancel["result"]["resultType"] == "complete", cancel
        broken = await _call(url, "hostile", {"kind": "long-id"})  # answered without a usable task
        assert "usable taskId" in broken["error"]["message"], broken
        await _created(url, "slow_task", {"seconds": 3600, "label": "room again"})
        again = await _call(url, "slow_task", {"seconds": 3600, "label": "full again"})
        assert again["error"]["data"]["error_code"] == "LIMIT_EXCEEDED", again


async def test_the_result_of_a_task_the_upstream_runs_is_redacted_by_a_policy(replicas: Replicas) -> None:
    rule = {"name": "no-secrets", "expression": 'tool.name == "slow_task"', "effect": "redact", "redact": ["secret"]}
    assert (await replicas.system.api.post("/api/v1/policies", json=rule)).status_code == 201
    task_id = await _created(replicas.a(), "slow_task", {"seconds": 0.2, "label": "kept"})
    ended = await ended_task(replicas.a(), task_id)
    assert ended["status"] == "completed" and ended["result"]["structuredContent"] == {"label": "kept"}, ended
    assert "s3cret" not in json.dumps(ended), ended
