"""Tasks as a hostile client or upstream would drive them, on one gateway replica with
``tests/peers/task_tools.py``: a cancelled task's call is cancelled at the upstream too; a result too
large to keep ends its task as failed, not working for ever; a record that is not a task's reads as
an unknown task."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import nats
import pytest

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_raw import modern_call
from tests.peers.launch import free_port, running_process
from tests.tasks_client import TASK_TOOLS, TASKS, ended_task, get_task, start_task, task_tools_system
from toolmesh.platform.bus.topology import TASKS_BUCKET

pytestmark = pytest.mark.integration


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with task_tools_system(nats_url, database_url) as running:
        yield running


def _url(system: System) -> str:
    return f"http://127.0.0.1:{system.settings.port}/mcp/tasks"


async def _upstream_runs(url: str, label: str) -> str:
    answer = await modern_call(url, "tools/call", {"name": "runs", "arguments": {"label": label}}, token=ADMIN_TOKEN)
    text: str = answer["result"]["content"][0]["text"]
    return text


async def test_a_cancelled_tasks_call_is_cancelled_at_the_upstream(system: System) -> None:
    url = _url(system)
    task_id = await start_task(url, "cancellable", {"label": "cancel-me"})

    async def started() -> bool:
        return await _upstream_runs(url, "cancel-me") == "1 running"

    await eventually(started, timeout=30, what="the upstream to start the call")
    ack = await modern_call(url, "tasks/cancel", {"taskId": task_id}, token=ADMIN_TOKEN, capabilities=TASKS)
    assert ack["result"]["resultType"] == "complete", ack

    async def cancelled() -> bool:
        return await _upstream_runs(url, "cancel-me") == "1 cancelled"

    await eventually(cancelled, timeout=30, what="the upstream to see its call cancelled")
    assert (await get_task(url, task_id))["result"]["status"] == "cancelled"


async def test_a_result_too_large_to_keep_fails_its_task(system: System, nats_url: str) -> None:
    """The reply carries the result (twice: content and structuredContent) within the bus's limit;
    the record, JSON with every non-ASCII character escaped, does not fit."""
    connection = await nats.connect(nats_url)
    limit = connection.max_payload
    await connection.close()
    url = _url(system)
    task_id = await start_task(url, "big_result", {"size": limit // 5, "char": "é"})
    ended = await ended_task(url, task_id)
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
        answer = await get_task(url, task_id)
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
    task_id = await start_task(url, "huge_question", {"size": limit // 4, "char": "é"}, asking)
    ended = await ended_task(url, task_id)
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
        first = await start_task(url, "counted_sleep", {"seconds": 0, "label": "limited"})
        second = await start_task(url, "counted_sleep", {"seconds": 0, "label": "limited"})
        assert (await ended_task(url, first))["status"] == "completed"
        refused = await ended_task(url, second)
        assert refused["status"] == "failed", refused
        assert refused["error"]["data"]["error_code"] == "RATE_LIMITED", refused["error"]


async def test_a_key_runs_a_bounded_number_of_tasks_per_replica(nats_url: str, database_url: str) -> None:
    """Past ``TOOLMESH_TASK_MAX_PER_KEY`` running tasks on a replica, a task-supporting call is refused
    with ``LIMIT_EXCEEDED``; a task that ended makes room again."""
    async with task_tools_system(nats_url, database_url, task_max_per_key=2) as system:
        url = _url(system)
        running = [await start_task(url, "slow_compute", {"seconds": 60, "label": f"held {i}"}) for i in range(2)]
        params = {"name": "slow_compute", "arguments": {"seconds": 60, "label": "one too many"}}
        refused = await modern_call(url, "tools/call", params, token=ADMIN_TOKEN, capabilities=TASKS)
        assert refused["error"]["data"]["error_code"] == "LIMIT_EXCEEDED", refused
        assert refused["error"]["data"]["context"] == {"task_max_per_key": 2}, refused
        cancel = await modern_call(url, "tasks/cancel", {"taskId": running[0]}, token=ADMIN_TOKEN, capabilities=TASKS)
        assert "result" in cancel, cancel

        async def admitted() -> str | None:
            answer = await modern_call(url, "tools/call", params, token=ADMIN_TOKEN, capabilities=TASKS)
            return answer.get("result", {}).get("taskId")

        assert await eventually(admitted, timeout=30, what="a task to be admitted once one ended")
