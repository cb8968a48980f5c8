"""An MCP server (Streamable HTTP, on 127.0.0.1) whose tools declare whether they may run as tasks,
as the 2026 conformance suite's Tasks scenarios expect of a server: toolmesh in front of it runs the
tasks (its requests to the client ride each call's own stream, so they reach the task they belong to).

``greet`` is plain; ``slow_compute``, ``protocol_error_job``, ``confirm_delete`` and ``multi_input``
may run as tasks (``execution.taskSupport`` ``optional``); ``failing_job`` and
``test_tool_with_task`` must (``required``). ``idempotent_sleep`` and ``counted_sleep`` may, and are
marked idempotent. ``regional_echo`` is plain, its ``region`` mirrored in an ``Mcp-Param-Region``
header (``x-mcp-header``), as the suite's custom-header scenario wants of a tool.
``counted_sleep`` and ``cancellable`` count their runs per label, ``cancellable`` notes its
cancellation too (``runs`` reads them back); ``big_result`` answers a text of ``size`` characters ``char``, and
``huge_question`` asks its client a question that long (then answers whether it got an answer).

    python tests/peers/task_tools.py --port 8765
"""

from __future__ import annotations

import argparse
from typing import Annotated, Any

import anyio
import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

TASK_SUPPORT = {
    "slow_compute": "optional",
    "protocol_error_job": "optional",
    "confirm_delete": "optional",
    "multi_input": "optional",
    "idempotent_sleep": "optional",
    "counted_sleep": "optional",
    "cancellable": "optional",
    "big_result": "optional",
    "huge_question": "optional",
    "failing_job": "required",
    "test_tool_with_task": "required",
}


class Confirmation(BaseModel):
    confirm: bool


class Name(BaseModel):
    name: str


class TaskTools(MCPServer[Any]):
    """Lists each tool with its ``execution.taskSupport``."""

    async def _handle_list_tools(self, ctx: Any, params: mcp_types.PaginatedRequestParams | None) -> Any:
        listed = await super()._handle_list_tools(ctx, params)
        for tool in listed.tools:
            if tool.name in TASK_SUPPORT:
                tool.execution = mcp_types.ToolExecution(task_support=TASK_SUPPORT[tool.name])  # type: ignore[arg-type]
        return listed


def build_server() -> TaskTools:
    """The server and its tools."""
    server = TaskTools(name="task-tools")

    @server.tool()
    def greet(name: str) -> str:
        """Say hello."""
        return f"Hello, {name}!"

    @server.tool()
    async def slow_compute(seconds: float = 1.0, label: str = "") -> str:
        """Wait ``seconds``, then answer."""
        await anyio.sleep(seconds)
        return f"computed {label} after {seconds:g}s"

    @server.tool()
    async def failing_job() -> str:
        """Fails as a tool after a second."""
        await anyio.sleep(1.0)
        raise ToolError("the job failed")

    @server.tool()
    async def protocol_error_job() -> str:
        """Fails with a JSON-RPC error."""
        raise MCPError(mcp_types.INTERNAL_ERROR, "the job broke")

    @server.tool()
    async def confirm_delete(filename: str, ctx: Context) -> str:
        """Asks before deleting."""
        answer = await ctx.elicit(f"Delete {filename}?", Confirmation)
        confirmed = answer.action == "accept" and bool(getattr(answer.data, "confirm", False))
        return f"{'deleted' if confirmed else 'kept'} {filename}"

    @server.tool()
    async def multi_input(ctx: Context) -> str:
        """Asks two questions at once."""
        names: list[str] = []

        async def ask(question: str) -> None:
            answer = await ctx.elicit(question, Name)
            names.append(answer.data.name if answer.action == "accept" and answer.data else "-")

        async with anyio.create_task_group() as group:
            group.start_soon(ask, "First name?")
            group.start_soon(ask, "Second name?")
        return "got " + " and ".join(sorted(names))

    @server.tool()
    async def test_tool_with_task(ctx: Context) -> str:
        """Asks for a name, then works with it."""
        answer = await ctx.elicit("What is your name?", Name)
        return f"Hello, {answer.data.name if answer.data else 'nobody'}!"

    @server.tool()
    def regional_echo(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], text: str) -> str:
        """Echo ``text`` from ``region``."""
        return f"{region}: {text}"

    @server.tool(annotations=mcp_types.ToolAnnotations(idempotent_hint=True))
    async def idempotent_sleep(seconds: float = 1.0) -> str:
        """Waits ``seconds``; safe to run again."""
        await anyio.sleep(seconds)
        return f"slept {seconds:g}s"

    @server.tool(annotations=mcp_types.ToolAnnotations(idempotent_hint=True))
    async def counted_sleep(seconds: float = 1.0, label: str = "") -> str:
        """Counts a run of ``label``, then waits ``seconds``; safe to run again."""
        RUNS[label] = RUNS.get(label, 0) + 1
        await anyio.sleep(seconds)
        return f"slept {seconds:g}s"

    @server.tool()
    async def cancellable(label: str) -> str:
        """Runs until cancelled; notes ``label`` as started, then as cancelled."""
        RUNS[label] = RUNS.get(label, 0) + 1
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            CANCELLED.add(label)
            raise
        return "never"

    @server.tool()
    def runs(label: str) -> str:
        """How many times ``label`` started, and whether it was cancelled."""
        return f"{RUNS.get(label, 0)} {'cancelled' if label in CANCELLED else 'running'}"

    @server.tool()
    def big_result(size: int, char: str = "x") -> str:
        """A text of ``size`` times ``char``."""
        return char * size

    @server.tool()
    async def huge_question(size: int, ctx: Context, char: str = "x") -> str:
        """Asks a question of ``size`` times ``char``."""
        try:
            answer = await ctx.elicit(char * size, Name)
        except MCPError as exc:
            return f"no answer: {exc.error.message}"
        return f"answered {answer.action}"

    return server


RUNS: dict[str, int] = {}
CANCELLED: set[str] = set()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    build_server().run("streamable-http", host="127.0.0.1", port=parser.parse_args().port)
