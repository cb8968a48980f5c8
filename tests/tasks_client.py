"""Tasks (the 2026-07-28 Tasks extension) driven as a client of that era drives them, for tests of
``tests/peers/task_tools.py`` behind toolmesh."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_raw import modern_call
from tests.peers.launch import free_port, running_process

TASK_TOOLS = Path(__file__).parent / "peers" / "task_tools.py"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
"""The client capabilities that declare the extension."""
ASKING = {**TASKS, "elicitation": {}}
"""Those and elicitation (the upstream may ask the client)."""


@asynccontextmanager
async def task_tools_system(nats_url: str, database_url: str, **overrides: Any) -> AsyncIterator[System]:
    """toolmesh (``overrides``: its settings) with ``tests/peers/task_tools.py`` running over Streamable
    HTTP and registered, connected, as ``tasks``."""
    port = free_port()
    async with (
        running_process([sys.executable, str(TASK_TOOLS), "--port", str(port)], port=port),
        running_system(nats_url, database_url, **overrides) as system,
    ):
        created = await system.register("tasks", "HTTP", {"base_url": f"http://127.0.0.1:{port}/mcp"})
        await system.wait_connected(created["id"])
        yield system


async def start_task(
    url: str, tool: str, arguments: dict[str, Any], capabilities: dict[str, Any] = TASKS, token: str = ADMIN_TOKEN
) -> str:
    """Call ``tool`` at ``url`` as a task; its id (the call must have made a task)."""
    params = {"name": tool, "arguments": arguments}
    created = await modern_call(url, "tools/call", params, token=token, capabilities=capabilities)
    assert created.get("result", {}).get("resultType") == "task", created
    task_id: str = created["result"]["taskId"]
    return task_id


async def get_task(url: str, task_id: str, token: str = ADMIN_TOKEN) -> dict[str, Any]:
    """``tasks/get``'s JSON-RPC answer."""
    return await modern_call(url, "tasks/get", {"taskId": task_id}, token=token, capabilities=TASKS)


async def ended_task(url: str, task_id: str, timeout: float = 90) -> dict[str, Any]:
    """The task once it completed, failed or was cancelled."""

    async def ended() -> dict[str, Any] | None:
        task = (await get_task(url, task_id))["result"]
        return task if task["status"] in ("completed", "failed", "cancelled") else None

    found: dict[str, Any] = await eventually(ended, timeout=timeout, what=f"task {task_id} to end")
    return found
