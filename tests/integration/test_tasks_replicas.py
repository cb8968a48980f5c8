"""Tasks outlive the gateway replica that started them.

Replica B (a ``toolmesh gateway`` process) starts three tasks of ``tests/peers/task_tools.py`` and is
SIGKILLed; replica A (the test's own) then serves them: a task is read and cancelled there at once;
the call of an idempotent tool runs again there and completes; the call of a tool that is not
idempotent is not run again, and its task fails saying so. Another principal never sees a task.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import nats
import pytest
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

from tests.harness import ADMIN_TOKEN, RoleProcess, System, eventually, second_gateway
from tests.mcp_raw import modern_call
from tests.tasks_client import ASKING, TASKS, ended_task, get_task, start_task, task_tools_system
from toolmesh.platform.bus.topology import TASKS_BUCKET
from toolmesh_gateway.front_door.task_records import BEAT_SUFFIX
from toolmesh_gateway.front_door.tasks import STALE_SECONDS

pytestmark = pytest.mark.integration


@dataclass
class Replicas:
    system: System
    b: RoleProcess
    port_b: int

    def url(self, port: int) -> str:
        return f"http://127.0.0.1:{port}/mcp/tasks"


@pytest.fixture
async def replicas(nats_url: str, database_url: str) -> AsyncIterator[Replicas]:
    async with task_tools_system(nats_url, database_url) as system, second_gateway(system) as (b, port_b):
        yield Replicas(system, b, port_b)


async def test_tasks_of_a_killed_replica_are_served_by_another(replicas: Replicas) -> None:
    on_b, on_a = replicas.url(replicas.port_b), replicas.url(replicas.system.settings.port)
    idempotent = await start_task(on_b, "idempotent_sleep", {"seconds": 2})
    not_idempotent = await start_task(on_b, "slow_compute", {"seconds": 4, "label": "once"})
    cancelled = await start_task(on_b, "slow_compute", {"seconds": 60, "label": "cancel"})
    replicas.b.kill()

    assert (await get_task(on_a, cancelled))["result"]["status"] == "working"
    ack = await modern_call(on_a, "tasks/cancel", {"taskId": cancelled}, token=ADMIN_TOKEN, capabilities=TASKS)
    assert ack["result"]["resultType"] == "complete" and "status" not in ack["result"], ack
    assert (await get_task(on_a, cancelled))["result"]["status"] == "cancelled"

    again = await ended_task(on_a, idempotent)
    assert again["status"] == "completed", again
    assert again["result"]["content"][0]["text"] == "slept 2s", again

    lost = await ended_task(on_a, not_idempotent)
    assert lost["status"] == "failed", lost
    assert "not marked idempotent, so it was not run again" in lost["error"]["message"], lost
    assert "result" not in lost


async def test_a_task_is_its_starters_only(replicas: Replicas) -> None:
    on_a = replicas.url(replicas.system.settings.port)
    task_id = await start_task(on_a, "slow_compute", {"seconds": 0, "label": "mine"})
    other = (await replicas.system.create_key("other", "agent"))["token"]
    foreign = await get_task(on_a, task_id, token=other)
    assert foreign["error"]["code"] == -32602, foreign
    cancel = await modern_call(on_a, "tasks/cancel", {"taskId": task_id}, token=other, capabilities=TASKS)
    assert cancel["error"]["code"] == -32602, cancel
    assert (await ended_task(on_a, task_id))["status"] == "completed"


async def _upstream_runs(url: str, label: str) -> str:
    answer = await modern_call(url, "tools/call", {"name": "runs", "arguments": {"label": label}}, token=ADMIN_TOKEN)
    text: str = answer["result"]["content"][0]["text"]
    return text


async def _stale(nats_url: str, task_id: str) -> bool:
    """Whether the task's runner has given no sign of life for ``STALE_SECONDS`` (its claim in the
    record, its heartbeat key)."""
    connection = await nats.connect(nats_url)
    try:
        kv = await connection.jetstream().key_value(TASKS_BUCKET)
        record = json.loads((await kv.get(task_id)).value or b"{}")
        try:
            beat = json.loads((await kv.get(task_id + BEAT_SUFFIX)).value or b"{}")
        except KeyNotFoundError:
            beat = {}
        alive = max(
            float(record["heartbeat"]), float(beat.get("at", 0)) if beat.get("runner") == record["runner"] else 0
        )
        return time.time() - alive > STALE_SECONDS
    finally:
        await connection.close()


async def test_a_stale_task_asked_for_at_once_runs_again_only_once(replicas: Replicas, nats_url: str) -> None:
    """Takeover is a compare-and-set: of several requests reaching one replica together, one runs the
    call again; before, each that lost the race on that replica ran it too (the runner was itself)."""
    on_b, on_a = replicas.url(replicas.port_b), replicas.url(replicas.system.settings.port)
    task_id = await start_task(on_b, "counted_sleep", {"seconds": 2, "label": "takeover"})
    assert (await eventually(lambda: _runs_are(on_a, "takeover", "1"), timeout=30, what="B's run")) is True
    replicas.b.kill()
    await eventually(lambda: _stale(nats_url, task_id), timeout=60, what="the task's heartbeat to go stale")

    asked = await asyncio.gather(*(get_task(on_a, task_id) for _ in range(6)))
    assert all(answer["result"]["status"] == "working" for answer in asked), asked
    assert (await ended_task(on_a, task_id))["status"] == "completed"
    assert (await _upstream_runs(on_a, "takeover")).split()[0] == "2"


async def _runs_are(url: str, label: str, count: str) -> bool:
    """Whether the upstream's ``runs`` of ``label`` starts with ``count`` (a count, or a count and state)."""
    return (await _upstream_runs(url, label)).startswith(f"{count} " if " " not in count else count)


async def test_cancelling_a_stale_task_does_not_run_its_call_again(replicas: Replicas, nats_url: str) -> None:
    """A task whose runner stopped is cancelled where it is: before, the cancelling replica took it
    over first, so the call of an idempotent tool ran again at the upstream only to be cancelled."""
    on_b, on_a = replicas.url(replicas.port_b), replicas.url(replicas.system.settings.port)
    task_id = await start_task(on_b, "counted_sleep", {"seconds": 0.5, "label": "cancel-stale"})
    assert await eventually(lambda: _runs_are(on_a, "cancel-stale", "1"), timeout=30, what="B's run")
    replicas.b.kill()
    await eventually(lambda: _stale(nats_url, task_id), timeout=60, what="the task's heartbeat to go stale")

    ack = await modern_call(on_a, "tasks/cancel", {"taskId": task_id}, token=ADMIN_TOKEN, capabilities=TASKS)
    assert ack["result"]["resultType"] == "complete", ack
    assert (await get_task(on_a, task_id))["result"]["status"] == "cancelled"
    probe = await start_task(on_a, "counted_sleep", {"seconds": 0, "label": "cancel-stale"})  # runs after any rerun
    assert (await ended_task(on_a, probe))["status"] == "completed"
    assert (await _upstream_runs(on_a, "cancel-stale")).split()[0] == "2"


async def _lapse(nats_url: str, task_id: str) -> None:
    """Write the task's heartbeat as its runner's would read after a long pause (compare-and-set)."""
    connection = await nats.connect(nats_url)
    try:
        kv = await connection.jetstream().key_value(TASKS_BUCKET)
        entry = await kv.get(task_id)
        record = json.loads(entry.value or b"{}")
        with contextlib.suppress(KeyWrongLastSequenceError):  # its runner changed it meanwhile: try again
            await kv.update(task_id, json.dumps({**record, "heartbeat": 0}).encode(), last=entry.revision)
        await kv.put(task_id + BEAT_SUFFIX, json.dumps({"runner": record["runner"], "at": 0}).encode())
    finally:
        await connection.close()


async def test_a_runner_whose_task_was_failed_elsewhere_stops_its_call(replicas: Replicas, nats_url: str) -> None:
    """A runner whose heartbeat lapsed (a long pause) while its call ran, and whose task another
    replica then failed, cancels its call: before, the call ran on to its end (up to an hour) with no
    task to report to."""
    on_a, on_b = replicas.url(replicas.system.settings.port), replicas.url(replicas.port_b)
    task_id = await start_task(on_a, "cancellable", {"label": "orphan"})
    assert await eventually(lambda: _runs_are(on_a, "orphan", "1"), timeout=30, what="A's run")

    async def failed_on_b() -> bool:
        await _lapse(nats_url, task_id)
        return bool((await get_task(on_b, task_id))["result"]["status"] == "failed")

    await eventually(failed_on_b, timeout=30, what="replica B to fail the task")
    cancelled = await eventually(
        lambda: _runs_are(on_a, "orphan", "1 cancelled"), timeout=30, what="A to cancel its call"
    )
    assert cancelled is True


async def _entry_revision(nats_url: str, key: str) -> int:
    """The revision of ``key`` in the task bucket (0: none)."""
    connection = await nats.connect(nats_url)
    try:
        kv = await connection.jetstream().key_value(TASKS_BUCKET)
        try:
            return int((await kv.get(key)).revision or 0)
        except KeyNotFoundError:
            return 0
    finally:
        await connection.close()


async def test_a_heartbeat_does_not_rewrite_the_task(replicas: Replicas, nats_url: str) -> None:
    """A runner's heartbeat is a small write of its own: before, every beat rewrote the whole record
    (the call's arguments with it) and woke everyone watching it."""
    on_a = replicas.url(replicas.system.settings.port)
    task_id = await start_task(on_a, "cancellable", {"label": "beating"})
    assert await eventually(lambda: _runs_are(on_a, "beating", "1"), timeout=30, what="A's run")
    written = await _entry_revision(nats_url, task_id)
    beat = task_id + BEAT_SUFFIX
    first = await eventually(lambda: _entry_revision(nats_url, beat), timeout=30, what="a heartbeat")

    async def renewed() -> bool:
        return await _entry_revision(nats_url, beat) > first

    await eventually(renewed, timeout=30, what="the next heartbeat")
    assert await _entry_revision(nats_url, task_id) == written
    assert (await get_task(on_a, task_id))["result"]["status"] == "working"
    await modern_call(on_a, "tasks/cancel", {"taskId": task_id}, token=ADMIN_TOKEN, capabilities=TASKS)


async def test_answers_for_a_task_whose_runner_stopped_are_refused_not_dropped(
    replicas: Replicas, nats_url: str
) -> None:
    """A ``tasks/update`` that reaches a stale task takes it over first; before, the answers it brought
    were then dropped with an empty ack (the takeover voided the input requests they answer)."""
    on_b, on_a = replicas.url(replicas.port_b), replicas.url(replicas.system.settings.port)
    task_id = await start_task(on_b, "confirm_delete", {"filename": "lost.txt"}, capabilities=ASKING)

    async def asked() -> dict[str, object] | None:
        task = (await get_task(on_a, task_id))["result"]
        return task if task["status"] == "input_required" else None

    (key,) = (await eventually(asked, timeout=30, what="the task to ask"))["inputRequests"]
    replicas.b.kill()
    await eventually(lambda: _stale(nats_url, task_id), timeout=60, what="the task's heartbeat to go stale")

    update = {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}}
    answer = await modern_call(on_a, "tasks/update", update, token=ADMIN_TOKEN, capabilities=TASKS)
    assert answer.get("error", {}).get("code") == -32602, answer
    assert "no longer asked, the answers were not delivered: the task is failed" in answer["error"]["message"]
    assert answer["error"]["data"] == {"undelivered": [key], "status": "failed"}


async def test_a_replica_shutting_down_hands_over_or_fails_its_tasks_at_once(replicas: Replicas) -> None:
    """SIGTERM: B's task of an idempotent tool runs again on A as soon as A is asked, its other task is
    failed saying why; before, both stayed working until their heartbeats went stale."""
    on_b, on_a = replicas.url(replicas.port_b), replicas.url(replicas.system.settings.port)
    handed = await start_task(on_b, "counted_sleep", {"seconds": 2, "label": "handed"})
    failed = await start_task(on_b, "slow_compute", {"seconds": 60, "label": "shutdown"})
    assert await eventually(lambda: _runs_are(on_a, "handed", "1"), timeout=30, what="B's run")
    replicas.b.terminate()

    ended = (await get_task(on_a, failed))["result"]
    assert ended["status"] == "failed", ended
    assert ended["statusMessage"].startswith("the gateway replica running this task shut down"), ended
    assert "slow_compute is not marked idempotent" in ended["error"]["message"], ended
    again = (await get_task(on_a, handed))["result"]
    assert again["status"] == "working", again
    assert (await ended_task(on_a, handed))["status"] == "completed"
    assert (await _upstream_runs(on_a, "handed")).split()[0] == "2"
