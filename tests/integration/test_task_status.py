"""Task status notifications (``notifications/tasks`` on ``subscriptions/listen``) of tasks of
``tests/peers/task_tools.py``: a client listening on one gateway replica hears a task that another
replica (B, a ``toolmesh gateway`` process) runs, each status it goes through, up to its result; a
principal that did not start a task never hears of it; naming tasks needs the extension."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from tests.harness import ADMIN_TOKEN, RoleProcess, System, second_gateway
from tests.mcp_raw import modern_call
from tests.tasks_client import ASKING, TASKS, listening, start_task, task_tools_system

pytestmark = pytest.mark.integration


@pytest.fixture
async def replicas(nats_url: str, database_url: str) -> AsyncIterator[tuple[System, RoleProcess, int]]:
    async with task_tools_system(nats_url, database_url) as system, second_gateway(system) as (b, port_b):
        yield system, b, port_b


def _url(port: int, path: str = "/mcp/tasks") -> str:
    return f"http://127.0.0.1:{port}{path}"


@pytest.mark.parametrize("path", ["/mcp/tasks", "/mcp"])
async def test_a_listener_hears_a_task_another_replica_runs(
    replicas: tuple[System, RoleProcess, int], path: str
) -> None:
    system, _, port_b = replicas
    on_a, on_b = _url(system.settings.port, path), _url(port_b, path)
    tool = "confirm_delete" if path == "/mcp/tasks" else "tasks__confirm_delete"
    task_id = await start_task(on_b, tool, {"filename": "notes.txt"}, capabilities=ASKING)
    async with listening(on_a, {"taskIds": [task_id], "toolsListChanged": True}) as stream:
        ack = await stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack
        assert ack["params"]["notifications"] == {"taskIds": [task_id], "toolsListChanged": True}, ack
        subscription = ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]

        heard = [await stream.task_notice()]
        while heard[-1]["status"] != "input_required":
            heard.append(await stream.task_notice())
        asked = heard[-1]
        assert asked["taskId"] == task_id and asked["_meta"]["io.modelcontextprotocol/subscriptionId"] == subscription
        (key,) = asked["inputRequests"]
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        update = {"taskId": task_id, "inputResponses": answer}
        acked = await modern_call(on_b, "tasks/update", update, token=ADMIN_TOKEN, capabilities=TASKS)
        assert acked["result"]["resultType"] == "complete", acked

        while heard[-1]["status"] not in ("completed", "failed", "cancelled"):
            heard.append(await stream.task_notice())
    assert [n["status"] for n in heard][-2:] == ["working", "completed"], heard
    assert heard[-1]["result"]["content"][0]["text"] == "deleted notes.txt", heard[-1]
    assert {n["taskId"] for n in heard} == {task_id}


async def test_a_task_is_heard_of_by_its_starter_only(replicas: tuple[System, RoleProcess, int]) -> None:
    """Another principal naming a task gets it left out of its acknowledgement and hears nothing of it,
    while it hears its own task (which ends after the foreign one, so a leak would come first)."""
    system, _, port_b = replicas
    on_a, on_b = _url(system.settings.port), _url(port_b)
    other = (await system.create_key("other", "agent"))["token"]
    foreign = await start_task(on_b, "slow_compute", {"seconds": 1, "label": "foreign"})
    own = await start_task(on_b, "slow_compute", {"seconds": 3, "label": "own"}, token=other)
    async with listening(on_a, {"taskIds": [foreign, own]}, token=other) as stream:
        ack = await stream.next()
        assert ack["params"]["notifications"] == {"taskIds": [own]}, ack
        heard = [await stream.task_notice()]
        while heard[-1]["status"] != "completed":
            heard.append(await stream.task_notice())
    assert {n["taskId"] for n in heard} == {own}, heard
    assert heard[-1]["result"]["content"][0]["text"] == "computed own after 3s"


async def test_naming_tasks_on_a_listen_stream_needs_the_extension(replicas: tuple[System, RoleProcess, int]) -> None:
    system, _, _ = replicas
    with anyio.fail_after(30):  # a stream that was accepted would never end
        async with listening(_url(system.settings.port), {"taskIds": ["x"]}, capabilities={}) as stream:
            answer = await stream.response.aread()
    assert b'"code":-32021' in answer.replace(b" ", b""), answer


async def test_a_listener_alone_hears_the_end_of_a_task_whose_replica_died(
    replicas: tuple[System, RoleProcess, int],
) -> None:
    """Nobody asks with ``tasks/*``: the stream itself has the task taken over once its runner's heartbeat
    lapsed (the tool is idempotent: it runs again) and hears it complete."""
    system, b, port_b = replicas
    task_id = await start_task(_url(port_b), "idempotent_sleep", {"seconds": 3})
    b.kill()
    async with listening(_url(system.settings.port), {"taskIds": [task_id]}) as stream:
        assert (await stream.next())["params"]["notifications"] == {"taskIds": [task_id]}
        heard = [await stream.task_notice()]
        while heard[-1]["status"] == "working":
            heard.append(await stream.task_notice(timeout=60))
    assert heard[-1]["status"] == "completed", heard
    assert heard[-1]["result"]["content"][0]["text"] == "slept 3s", heard
