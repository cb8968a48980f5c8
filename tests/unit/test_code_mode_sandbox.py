"""Code mode's sandbox (``front_door.code_mode``) with real monty workers and in-memory packs.

No toolmesh servers: the catalog is filled by hand and tool calls answer from a dict, so these
tests check the sandbox's guarantees and the pack rules themselves.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolmesh.contracts.tools import ToolCallRequest
from toolmesh.errors import ServerUnavailable
from toolmesh.lifecycle import ServerStatus
from toolmesh.platform.config import Settings
from toolmesh_gateway.catalog import Catalog, CatalogServer, CatalogTool
from toolmesh_gateway.front_door import packs
from toolmesh_gateway.front_door.code_mode import CallerPacks, CodeRunner, PackError, RunResult, tool_value

pytestmark = pytest.mark.unit


class Calls:
    """Answers tool calls like ``ToolCalls`` would; records them; ``slow`` waits until cancelled."""

    def __init__(self) -> None:
        self.requests: list[ToolCallRequest] = []
        self.cancelled = 0

    async def __call__(self, request: ToolCallRequest) -> dict[str, Any]:
        self.requests.append(request)
        if request.name == "slow":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if request.name == "down":
            raise ServerUnavailable("Server unavailable: beta")
        if request.name == "fail":
            return {"content": [{"type": "text", "text": "it broke"}], "isError": True}
        if request.name == "echo":
            return {"content": [{"type": "text", "text": request.arguments["text"]}], "isError": False}
        return {"content": [], "isError": False, "structuredContent": {"args": request.arguments}}


async def search(query: str, limit: int, servers: list[str] | None) -> list[dict[str, Any]]:
    return [{"name": "alpha.echo", "query": query, "limit": limit}]


def catalog() -> Catalog:
    servers = [
        CatalogServer("1", "alpha", ServerStatus.CONNECTED, transport="STDIO"),
        CatalogServer("2", "beta-two", ServerStatus.DEGRADED, transport="HTTP"),
        CatalogServer("3", "toolmesh", ServerStatus.CONNECTED, transport="SSE"),
        CatalogServer("4", "off", ServerStatus.DISCONNECTED, transport="SSE"),
    ]
    tools = [
        ("1", CatalogTool("echo")),
        ("1", CatalogTool("slow")),
        ("1", CatalogTool("fail")),
        ("1", CatalogTool("api.v2.create")),
        ("2", CatalogTool("sum")),
        ("2", CatalogTool("down")),
        ("3", CatalogTool("search")),
    ]
    result = Catalog()
    result.load(servers, tools, 1)
    return result


@pytest.fixture(scope="module")
async def runner() -> AsyncIterator[tuple[CodeRunner, Calls]]:
    calls = Calls()
    settings = Settings(code_timeout_seconds=2.0, code_max_memory_bytes=32 * 1024 * 1024)
    code = CodeRunner(settings)
    try:
        yield code, calls
    finally:
        await code.close()


async def run(runner: tuple[CodeRunner, Calls], code: str, timeout: float | None = None) -> RunResult:
    return await runner[0].run(code, CallerPacks(catalog().view("default"), runner[1], search), timeout)


async def test_pack_calls_chain_and_return_structured_content_or_text(runner: tuple[CodeRunner, Calls]) -> None:
    result = await run(runner, 'a = alpha.echo(text="hi")\nb = beta_two.sum(x=len(a), y=a)\nprint(a)\n[a, b]')
    assert result.ok, result.error
    assert result.value == ["hi", {"args": {"x": 2, "y": "hi"}}]
    assert result.output == "hi\n" and result.tool_calls == 2
    last = runner[1].requests[-1]
    assert (last.name, last.server_id, last.arguments) == ("sum", "2", {"x": 2, "y": "hi"})
    assert last.timeout_seconds is not None and 0 < last.timeout_seconds <= 2.0


async def test_tool_names_that_are_not_identifiers_are_called_by_their_identifier(
    runner: tuple[CodeRunner, Calls],
) -> None:
    result = await run(runner, "alpha.api_v2_create(n=1)")
    assert result.ok and result.value == {"args": {"n": 1}}
    assert runner[1].requests[-1].name == "api.v2.create"


async def test_unknown_pack_lists_the_packs(runner: tuple[CodeRunner, Calls]) -> None:
    result = await run(runner, "unknown.some_tool()")
    assert not result.ok and result.error is not None
    assert "NameError" in result.error
    assert "available packs: alpha, beta_two, off, proxy, toolmesh" in result.error


async def test_unknown_tool_lists_the_tools_of_the_pack_and_can_be_caught(runner: tuple[CodeRunner, Calls]) -> None:
    result = await run(runner, "alpha.nonexistent()")
    assert not result.ok and result.error is not None
    assert "AttributeError" in result.error
    assert "pack 'alpha' has no tool 'nonexistent'; available tools: api.v2.create, echo, fail, slow" in result.error
    caught = await run(runner, "try:\n    alpha.nope()\nexcept AttributeError as e:\n    r = str(e)\nr")
    assert caught.ok and "available tools" in caught.value


async def test_tool_errors_and_routing_errors_raise_in_the_sandbox(runner: tuple[CodeRunner, Calls]) -> None:
    failed = await run(runner, "alpha.fail()")
    assert not failed.ok and "RuntimeError: alpha.fail failed: it broke" in (failed.error or "")
    down = await run(runner, "beta_two.down()")
    assert not down.ok and "SERVER_UNAVAILABLE" in (down.error or "")
    positional = await run(runner, 'alpha.echo("x")')
    assert not positional.ok and "keyword arguments only" in (positional.error or "")


async def test_local_packs_win_over_a_server_of_the_same_name(runner: tuple[CodeRunner, Calls]) -> None:
    before = len(runner[1].requests)
    result = await run(runner, 'toolmesh.search(query="echo things", limit=3)')
    assert result.ok and result.value == [{"name": "alpha.echo", "query": "echo things", "limit": 3}]
    assert len(runner[1].requests) == before  # the server named "toolmesh" was not called


async def test_proxy_lists_servers_and_tools(runner: tuple[CodeRunner, Calls]) -> None:
    servers = await run(runner, "proxy.list_servers()")
    assert servers.ok
    assert servers.value[0] == {"name": "alpha", "type": "stdio", "enabled": True, "status": "CONNECTED"}
    assert {s["name"]: s["enabled"] for s in servers.value}["off"] is False
    tools = await run(runner, 'proxy.list_tools(server="beta-two")')
    assert tools.ok and [t["name"] for t in tools.value] == ["down", "sum"]
    unknown = await run(runner, 'proxy.list_tools(server="nope")')
    assert not unknown.ok and "available servers: alpha, beta-two, off, toolmesh" in (unknown.error or "")


async def test_timeout_cancels_the_sandbox_and_the_call_in_flight(runner: tuple[CodeRunner, Calls]) -> None:
    result = await run(runner, "alpha.slow()", timeout=0.5)
    assert not result.ok and "TimeoutError" in (result.error or "")
    assert runner[1].cancelled == 1
    spin = await run(runner, "while True:\n    pass", timeout=0.5)
    assert not spin.ok and "TimeoutError" in (spin.error or "")
    after = await run(runner, "1 + 1")
    assert after.ok and after.value == 2  # the pool is still serving


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("import os\nos.listdir('/')", "PermissionError"),
        ("import os\nos.system('touch {canary}')", "Error"),
        ("import os\nos.environ['HOME']", "RuntimeError"),
        ("open('/etc/passwd').read()", "PermissionError"),
        ("open('{canary}', 'w').write('x')", "PermissionError"),
        ("from pathlib import Path\nPath('/etc/passwd').read_text()", "PermissionError"),
        ("__import__('os')", "NameError"),
        ("import subprocess", "ModuleNotFoundError"),
        ("import socket", "ModuleNotFoundError"),
        ("().__class__.__mro__[1].__subclasses__()", "AttributeError"),
        ("type(1).__subclasses__()", "AttributeError"),
        ("(lambda: 0).__code__", "AttributeError"),
        ("globals()", "NameError"),
        ("eval(\"__import__('os')\")", "NameError"),
        ("exec('import subprocess')", "ModuleNotFoundError"),
        ("eval(\"open('/etc/passwd').read()\")", "PermissionError"),
        ("compile('1', 'x', 'eval')", "NameError"),
        ("import sys\nsys.modules", "AttributeError"),
        ("x = 'a' * (10 ** 10)", "MemoryError"),
        ("l = []\nwhile True:\n    l.append('x' * 10000)", "MemoryError"),
        ("def f():\n    return f()\nf()", "Error"),
        ("import time\ntime.sleep(100)", "TimeoutError"),
        ("while True:\n    pass", "TimeoutError"),
    ],
)
async def test_known_escapes_fail_inside_the_sandbox(
    runner: tuple[CodeRunner, Calls], tmp_path: Path, code: str, expected: str
) -> None:
    canary = tmp_path / "canary"
    result = await run(runner, code.format(canary=canary), timeout=1.0)
    assert not result.ok, result.value
    assert expected in (result.error or ""), result.error
    assert not canary.exists()
    assert os.getcwd() != "/"  # the host process is untouched


def test_tool_value_prefers_structured_content_then_text() -> None:
    assert tool_value("p", "t", {"content": [], "structuredContent": {"a": 1}}) == {"a": 1}
    assert tool_value("p", "t", {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}) == "a\nb"
    with pytest.raises(PackError, match=r"p\.t failed: nope"):
        tool_value("p", "t", {"content": [{"type": "text", "text": "nope"}], "isError": True})


def test_server_packs_skip_local_names_and_prefer_exact_spellings() -> None:
    assert packs.server_packs(["a-b", "a_b", "proxy", "class", "my-server"]) == {"a_b": "a_b", "my_server": "my-server"}
    assert packs.match_tool("get_item", ["get-item", "other"]) == "get-item"
    assert packs.match_tool("x_y", ["x.y", "x-y"]) is None  # ambiguous: call through call_tool instead
    assert packs.match_tool("x-y", ["x.y", "x-y"]) == "x-y"
