"""An MCP server (Streamable HTTP, on 127.0.0.1) that runs tasks itself: it declares the Tasks extension
(``io.modelcontextprotocol/tasks``) and serves ``tasks/get``, ``tasks/update`` and ``tasks/cancel``, so
toolmesh in front of it passes its tasks through rather than running its own.

For a 2026-07-28 client that declares the extension: ``test_tool_with_task`` (``taskSupport``
``required``) first answers an ``InputRequiredResult`` asking for a name, and on the retry with the
answer a ``CreateTaskResult`` whose task completes saying hello to it, as the suite's
``tasks-mrtr-composition`` wants; ``slow_task`` (``optional``) makes a task that completes after
``seconds`` (``label`` in its result, and in its structured content with a ``secret``) unless
cancelled; ``confirm_task`` a task that asks its client a
question (``input_required``, answered through ``tasks/update``). ``hostile`` answers as ``kind`` says: a
task id past any sensible length (``long-id``), a task id that is not a string (``number-id``), a
task whose ``tasks/get`` names a status the extension has not (``bad-status``), or one whose
``tasks/get`` carries fields a task has not, a task id of its own and a status message too long to
keep (``leaky``), or one whose result is larger than any NATS message (``huge``: ``HUGE_BYTES`` of text, done
after half a second). Task ids say which caller's task they are nowhere: any caller reaching this server
could read any task, which is what toolmesh must not let happen.

    python tests/peers/upstream_tasks.py --port 8766
"""

from __future__ import annotations

import argparse
import itertools
import time
from datetime import UTC, datetime
from typing import Any

import mcp_types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

EXTENSION = "io.modelcontextprotocol/tasks"
HUGE_BYTES = 10 * 1024 * 1024
TASK_SUPPORT = {"test_tool_with_task": "required", "slow_task": "optional", "confirm_task": "optional"}
NAME_QUESTION = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "What is your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    },
}
CONFIRM_QUESTION = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Go ahead?",
        "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}},
    },
}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    meta = (ctx.params or {}).get("_meta")
    capabilities = meta.get(mcp_types.CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and EXTENSION in extensions


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


class Tasks(Extension):
    """The tasks of this server, in its memory."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", mcp_types.RequestParams, self._get),
            MethodBinding("tasks/update", mcp_types.RequestParams, self._update),
            MethodBinding("tasks/cancel", mcp_types.RequestParams, self._cancel),
        ]

    async def intercept_tool_call(
        self, params: mcp_types.CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        arguments = params.arguments or {}
        if params.name not in TASK_SUPPORT and params.name != "hostile":
            return await call_next(ctx)
        if not _declared(ctx):
            if TASK_SUPPORT.get(params.name) == "required":
                raise MCPError(-32021, f"{params.name} runs only as a task")
            return _text("ran without a task")
        if params.name == "test_tool_with_task":
            given = (params.input_responses or {}).get("user_name")
            answer = given.model_dump(by_alias=True, mode="json") if given is not None else None
            if not isinstance(answer, dict):
                return mcp_types.InputRequiredResult(
                    input_requests={"user_name": NAME_QUESTION},  # type: ignore[dict-item]
                    request_state="asked-for-a-name",
                )
            name = str((answer.get("content") or {}).get("name", "nobody"))
            return self._create(due=time.monotonic() + 0.5, result=_text(f"Hello, {name}!"))
        if params.name == "slow_task":
            seconds = float(arguments.get("seconds", 1))
            label = str(arguments.get("label", ""))
            structured = {"label": label, "secret": f"s3cret-{label}"}
            return self._create(
                due=time.monotonic() + seconds, result={**_text(f"done {label}"), "structuredContent": structured}
            )
        if params.name == "confirm_task":
            return self._create(due=None, result=None, asking=True)
        return self._hostile(str(arguments.get("kind", "")))

    def _create(
        self, *, due: float | None, result: dict[str, Any] | None, asking: bool = False, task_id: str | None = None
    ) -> dict[str, Any]:
        task_id = task_id or f"upstream-{next(self._ids)}"
        created = _now()
        self.tasks[task_id] = {"due": due, "result": result, "asking": asking, "createdAt": created, "status": None}
        return {"resultType": "task", **self._public(task_id)}

    def _hostile(self, kind: str) -> dict[str, Any]:
        if kind == "long-id":
            return {"resultType": "task", "taskId": "x" * 100_000, "status": "working"}
        if kind == "number-id":
            return {"resultType": "task", "taskId": 42, "status": "working"}
        if kind == "huge":
            result = _text("z" * HUGE_BYTES)
            return self._create(due=time.monotonic() + 0.5, result=result, task_id=f"huge-{next(self._ids)}")
        return self._create(due=0, result=_text("leaked"), task_id=f"{kind}-{next(self._ids)}")

    def _status(self, task: dict[str, Any]) -> str:
        if task["status"] is not None:
            return str(task["status"])
        if task["asking"]:
            return "input_required"
        return "completed" if time.monotonic() >= task["due"] else "working"

    def _public(self, task_id: str) -> dict[str, Any]:
        task = self.tasks[task_id]
        status = self._status(task)
        public: dict[str, Any] = {
            "taskId": task_id,
            "status": status,
            "createdAt": task["createdAt"],
            "lastUpdatedAt": _now(),
            "ttlMs": 600_000,
            "pollIntervalMs": 200,
        }
        if status == "completed":
            public["result"] = task["result"]
        if status == "input_required":
            public["inputRequests"] = {"confirm": CONFIRM_QUESTION}
        return public

    def _task(self, ctx: ServerRequestContext[Any, Any]) -> tuple[str, dict[str, Any]]:
        task_id = (ctx.params or {}).get("taskId")
        if not isinstance(task_id, str) or task_id not in self.tasks:
            raise MCPError(mcp_types.INVALID_PARAMS, "Unknown task")
        return task_id, self.tasks[task_id]

    async def _get(self, ctx: ServerRequestContext[Any, Any], _: Any) -> dict[str, Any]:
        task_id, _task = self._task(ctx)
        detailed = {"resultType": "complete", **self._public(task_id)}
        if task_id.startswith("bad-status"):
            detailed["status"] = "exploded"
        if task_id.startswith("leaky"):
            detailed.update(requestState="leaked-state", secret="upstream-only", statusMessage="y" * 100_000)
        return detailed

    async def _update(self, ctx: ServerRequestContext[Any, Any], _: Any) -> dict[str, Any]:
        _id, task = self._task(ctx)
        answer = ((ctx.params or {}).get("inputResponses") or {}).get("confirm")
        if task["asking"] and isinstance(answer, dict):
            confirmed = bool((answer.get("content") or {}).get("confirm"))
            task.update(asking=False, due=0, result=_text("confirmed" if confirmed else "declined"))
        return {"resultType": "complete"}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], _: Any) -> dict[str, Any]:
        _id, task = self._task(ctx)
        if self._status(task) not in ("completed", "failed", "cancelled"):
            task["status"] = "cancelled"
        return {"resultType": "complete"}


class UpstreamTasks(MCPServer[Any]):
    """Lists each task tool with its ``execution.taskSupport``."""

    async def _handle_list_tools(self, ctx: Any, params: mcp_types.PaginatedRequestParams | None) -> Any:
        listed = await super()._handle_list_tools(ctx, params)
        for tool in listed.tools:
            if tool.name in TASK_SUPPORT:
                tool.execution = mcp_types.ToolExecution(task_support=TASK_SUPPORT[tool.name])  # type: ignore[arg-type]
        return listed


def build_server() -> UpstreamTasks:
    """The server and its tools (their bodies run only for a client without the extension)."""
    server = UpstreamTasks(name="upstream-tasks", extensions=[Tasks()])

    @server.tool()
    def test_tool_with_task() -> str:
        """Asks for a name, then says hello as a task."""
        return "never without a task"

    @server.tool()
    def slow_task(seconds: float = 1.0, label: str = "") -> str:
        """A task that completes after ``seconds``."""
        return "ran without a task"

    @server.tool()
    def confirm_task() -> str:
        """A task that asks its client to confirm."""
        return "ran without a task"

    @server.tool()
    def hostile(kind: str) -> str:
        """A task answered as ``kind`` says."""
        return "ran without a task"

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    build_server().run("streamable-http", host="127.0.0.1", port=parser.parse_args().port)
