"""Tasks (the 2026-07-28 Tasks extension) driven as a client of that era drives them, for tests of
``tests/peers/task_tools.py`` behind toolmesh."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_raw import MCP_ACCEPT, MODERN, modern_call
from tests.peers.launch import free_port, running_process

TASK_TOOLS = Path(__file__).parent / "peers" / "task_tools.py"
UPSTREAM_TASKS = Path(__file__).parent / "peers" / "upstream_tasks.py"
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


@asynccontextmanager
async def upstream_tasks_registered(system: System) -> AsyncIterator[str]:
    """``tests/peers/upstream_tasks.py`` (a server that runs tasks itself) running over Streamable HTTP and
    registered with ``system``, connected, as ``upstream-tasks``; its server id."""
    port = free_port()
    async with running_process([sys.executable, str(UPSTREAM_TASKS), "--port", str(port)], port=port):
        created = await system.register("upstream-tasks", "HTTP", {"base_url": f"http://127.0.0.1:{port}/mcp"})
        await system.wait_connected(created["id"])
        yield str(created["id"])


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


class Listen:
    """An open ``subscriptions/listen`` stream: its frames, one JSON-RPC message each (``next``)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self, timeout: float = 30) -> dict[str, Any]:
        """The next message on the stream (an SSE event's data)."""
        data: list[str] = []
        with anyio.fail_after(timeout):
            async for line in self._lines:
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line and data:
                    message: dict[str, Any] = json.loads("\n".join(data))
                    return message
        raise AssertionError("the listen stream ended")

    async def task_notice(self, timeout: float = 30) -> dict[str, Any]:
        """The params of the next ``notifications/tasks`` on the stream (other frames are skipped)."""
        while True:
            message = await self.next(timeout)
            if message.get("method") == "notifications/tasks":
                params: dict[str, Any] = message["params"]
                return params


@asynccontextmanager
async def listening(
    url: str, notifications: dict[str, Any], token: str = ADMIN_TOKEN, capabilities: dict[str, Any] = TASKS
) -> AsyncIterator[Listen]:
    """A 2026-07-28 ``subscriptions/listen`` stream at ``url`` asking for ``notifications``, as a client
    of that era opens it (the SDK's client drops frames it has no event for, such as ``notifications/tasks``)."""
    meta = {mcp_types.PROTOCOL_VERSION_META_KEY: MODERN, mcp_types.CLIENT_CAPABILITIES_META_KEY: capabilities}
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "subscriptions/listen",
        "params": {"notifications": notifications, "_meta": meta},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        **MCP_ACCEPT,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen",
    }
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(10, read=None)) as http,
        http.stream("POST", url, json=body, headers=headers) as response,
    ):
        yield Listen(response)
