"""What of a task an upstream runs itself reaches the client (``front_door.upstream_tasks``): only the
task's own fields, each of its type, and only for a status of the extension; and which calls go to
the upstream for it to run a task at all."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import mcp_types
import pytest
from mcp.shared.exceptions import MCPError

from toolmesh_gateway.front_door.upstream_tasks import passed_through, screened
from toolmesh_gateway.offers import ServerDescription

TTL_MS = 60_000
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def _ctx(version: str, capabilities: dict[str, Any]) -> Any:
    meta = {mcp_types.CLIENT_CAPABILITIES_META_KEY: capabilities}
    return SimpleNamespace(protocol_version=version, params={"name": "t", "_meta": meta})


def test_only_the_tasks_own_fields_pass_each_of_its_type() -> None:
    answer = {
        "taskId": "the-upstreams-own",
        "status": "completed",
        "statusMessage": "y" * 100_000,
        "createdAt": "2026-11-26T00:00:00.000Z",
        "lastUpdatedAt": ["not", "a", "time"],
        "ttlMs": 10**12,
        "pollIntervalMs": True,
        "result": {"content": []},
        "error": "not an object",
        "requestState": "leaked",
        "_meta": {"upstream": "only"},
    }
    assert screened("up", answer, TTL_MS) == {
        "status": "completed",
        "createdAt": "2026-11-26T00:00:00.000Z",
        "ttlMs": TTL_MS,
        "result": {"content": []},
    }


@pytest.mark.parametrize("status", ["exploded", None, 3, ""])
def test_a_status_outside_the_extension_fails_the_answer(status: object) -> None:
    with pytest.raises(MCPError) as raised:
        screened("up", {"status": status}, TTL_MS)
    assert raised.value.error.code == mcp_types.INTERNAL_ERROR


def test_a_call_goes_to_the_upstream_for_its_task_only_when_both_sides_declare_the_extension() -> None:
    runs_tasks = ServerDescription(modern_versions=("2026-07-28",), modern_tasks=True)
    assert passed_through(_ctx("2026-07-28", TASKS), runs_tasks)
    assert not passed_through(_ctx("2026-07-28", {}), runs_tasks)
    assert not passed_through(_ctx("2025-11-25", TASKS), runs_tasks)
    assert not passed_through(_ctx("2026-07-28", TASKS), runs_tasks, "prompts/get")
    assert not passed_through(_ctx("2026-07-28", TASKS), ServerDescription(modern_versions=("2026-07-28",)))
