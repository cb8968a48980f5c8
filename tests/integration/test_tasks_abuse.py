"""Tasks as a hostile client or upstream would drive them, on one gateway replica with
``tests/peers/task_tools.py``: a cancelled task's call is cancelled at the upstream too; a result too
large to keep ends its task as failed, not working for ever; a record that is not a task's reads as
an unknown task."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_raw import modern_call
from tests.peers.launch import free_port, running_process
from toolmesh.platform.bus.topology import TASKS_BUCKET

pytestmark = pytest.mark.integration
TASK_TOOLS = Path(__file__).parents[1] / "peers" / "task_tools.py"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    port = free_port()
    async with (
        running_process([sys.executable, str(TASK_TOOLS), "--port", str(port)], port=port),
        running_system(nats_url, database_url) as system,
    ):
        created = await system.register("tasks", "HTTP", {"base_url": f"http://127.0.0.1:{port}/mcp"})
        await system.wait_connected(created["id"])
        yield system


def _url(system: System) -> str:
    return f"http://127.0.0.1:{system.settings.port}/mcp/tasks"


async def _start(url: str, tool: str, arguments: dict[str, Any], capabilities: dict[str, Any] = TASKS) -> str:
    params = {"name": tool, "arguments": arguments}
    created = await modern_call(url, "tools/call", params, token=ADMIN_TOKEN, capabilities=capabilities)
    assert created.get("result", {}).get("resultType") == "task", created
    task_id: str = created["result"]["taskId"]
    return task_id


async def _task(url: str, task_id: str) -> dict[str, Any]:
    return await modern_call(url, "tasks/get", {"taskId": task_id}, token=ADMIN_TOKEN, capabilities=TASKS)


async def _ended(url: str, task_id: str, timeout: float = 60) -> dict[str, Any]:
    async def ended() -> dict[str, Any] | None:
        task = (await _task(url, task_id))["result"]
        return task if task["status"] in ("completed", "failed", "cancelled") else None

    found: dict[str, Any] = await eventually(ended, timeout=timeout, what=f"task {task_id} to end")
    return found


async def _upstream_runs(url: str, label: str) -> str:
    answer = await modern_call(url, "tools/call", {"name": "runs", "arguments": {"label": label}}, token=ADMIN_TOKEN)
    text: str = answer["result"]["content"][0]["text"]
    return text


async def test_a_cancelled_tasks_call_is_cancelled_at_the_upstream(system: System) -> None:
    url = _url(system)
    task_id = await _start(url, "cancellable", {"label": "cancel-me"})

    async def started() -> bool:
        return await _upstream_runs(url, "cancel-me") == "1 running"

    await eventually(started, timeout=30, what="the upstream to start the call")
    ack = await modern_call(url, "tasks/cancel", {"taskId": task_id}, token=ADMIN_TOKEN, capabilities=TASKS)
    assert ack["result"]["resultType"] == "complete", ack

    async def cancelled() -> bool:
        return await _upstream_runs(url, "cancel-me") == "1 cancelled"

    await eventually(cancelled, timeout=30, what="the upstream to see its call cancelled")
    assert (await _task(url, task_id))["result"]["status"] == "cancelled"


async def test_a_result_too_large_to_keep_fails_its_task(system: System, nats_url: str) -> None:
    """The reply carries the result (twice: content and structuredContent) within the bus's limit;
    the record, JSON with every non-ASCII character escaped, does not fit."""
    connection = await nats.connect(nats_url)
    limit = connection.max_payload
    await connection.close()
    url = _url(system)
    task_id = await _start(url, "big_result", {"size": limit // 5, "char": "é"})
    ended = await _ended(url, task_id)
    assert ended["status"] == "failed", {k: v for k, v in ended.items() if k != "result"}
    assert "too large" in ended["error"]["message"], ended["error"]


async def test_a_record_that_is_not_a_tasks_reads_as_an_unknown_task(system: System, nats_url: str) -> None:
    connection = await nats.connect(nats_url)
    try:
        kv = await connection.jetstream().key_value(TASKS_BUCKET)
        await kv.put("not-json", b"\xff{")
        await kv.put("not-an-object", b"[1, 2]")
    finally:
        await connection.close()
    url = _url(system)
    for task_id in ("not-json", "not-an-object"):
        answer = await _task(url, task_id)
        assert answer.get("error", {}).get("code") == -32602, answer


async def test_an_upstream_request_too_large_to_keep_is_refused_to_the_upstream(system: System, nats_url: str) -> None:
    """A question the task's record cannot hold (JSON escapes every non-ASCII character) is answered
    to the upstream with an error, and the call goes on; before, the runner died with it, its task
    stayed ``working`` until another request took it over and failed it as a stopped replica's."""
    connection = await nats.connect(nats_url)
    limit = connection.max_payload
    await connection.close()
    url = _url(system)
    asking = {**TASKS, "elicitation": {}}
    task_id = await _start(url, "huge_question", {"size": limit // 4, "char": "é"}, asking)
    ended = await _ended(url, task_id)
    assert ended["status"] == "completed", ended.get("error")
    assert ended["result"]["content"][0]["text"].startswith("no answer: "), ended["result"]


async def test_a_namespaces_call_limit_holds_for_tasks(nats_url: str, database_url: str) -> None:
    """Starting a task answers at once, but its call is admitted like any: past the namespace's calls
    per second, the task fails RATE_LIMITED."""
    port = free_port()
    limited = {"namespace_calls_per_second": 0.001, "namespace_calls_burst": 1}
    async with (
        running_process([sys.executable, str(TASK_TOOLS), "--port", str(port)], port=port),
        running_system(nats_url, database_url, **limited) as system,
    ):
        created = await system.register("tasks", "HTTP", {"base_url": f"http://127.0.0.1:{port}/mcp"})
        await system.wait_connected(created["id"])
        url = _url(system)
        first = await _start(url, "counted_sleep", {"seconds": 0, "label": "limited"})
        second = await _start(url, "counted_sleep", {"seconds": 0, "label": "limited"})
        assert (await _ended(url, first))["status"] == "completed"
        refused = await _ended(url, second)
        assert refused["status"] == "failed", refused
        assert refused["error"]["data"]["error_code"] == "RATE_LIMITED", refused["error"]
