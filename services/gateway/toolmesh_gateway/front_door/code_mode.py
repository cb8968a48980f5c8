"""Code mode: ``run(code)`` executes agent-written Python in a pydantic-monty sandbox.

The snippet runs in a pooled ``monty`` worker subprocess (no host file system, environment,
network or imports beyond Monty's own safe modules) under memory and time limits. Every pack is
a host object whose method calls suspend the sandbox; the host performs the call (a tool call
through the same routing as ``POST /tools/call``, or a local pack's function) and resumes the
sandbox with the result, so snippets read like synchronous code. A run that exceeds its time
budget is cancelled as a whole: the sandbox session is discarded and an upstream call in flight
is cancelled by ``ToolCalls`` (``notifications/cancelled`` upstream). The pool's workers are shared
fairly between namespaces (``worker_shares``): one tenant's runs cannot hold them all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from pydantic import ValidationError
from pydantic_monty import (
    AsyncFunctionSnapshot,
    AsyncMonty,
    AsyncNameLookupSnapshot,
    ClassInstance,
    CollectString,
    MontyComplete,
    MontyCrashedError,
    MontyError,
    MontyRuntimeError,
    ResourceLimits,
)

from toolmesh.contracts.search import SearchRequest
from toolmesh.contracts.tools import ToolCallRequest
from toolmesh.errors import ExecutionTimeout, ToolmeshError
from toolmesh.payloads import invalid_payload
from toolmesh.platform.config import Settings
from toolmesh_gateway.catalog import CatalogServer
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.front_door import packs
from toolmesh_gateway.front_door.worker_shares import WorkerShares

log = logging.getLogger("toolmesh.gateway.code")
POOL_GRACE_SECONDS = 5.0
"""How much longer than a run's budget the pool lets one worker turn last before killing it."""
SHUTDOWN_SETTLE_SECONDS = 0.2
"""Pause after closing the pool so its background threads finish before the interpreter does."""
MAX_OUTPUT_BYTES = 256 * 1024
MAX_RESULT_DEPTH = 200
"""How deep a run's result may nest: the sandbox's own recursion limit."""

CallTool = Callable[[ToolCallRequest], Awaitable[dict[str, Any]]]
Search = Callable[[str, int, list[str] | None], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True)
class CallerPacks:
    """What one caller's snippet can reach: the servers it sees, its tool calls and its search."""

    view: CatalogView
    call_tool: CallTool
    search: Search


class PackHandle:
    """What a pack is inside the sandbox: an opaque object whose method calls come to the host."""

    def __init__(self, name: str) -> None:
        self.name = name


@dataclass
class RunResult:
    """The outcome of one ``run``: the last expression's value and what the snippet printed."""

    ok: bool
    value: Any = None
    output: str = ""
    error: str | None = None
    tool_calls: int = 0
    duration_ms: float = 0.0
    max_bytes: int = MAX_OUTPUT_BYTES

    def body(self) -> dict[str, Any]:
        """A JSON-ready body: ``result`` or ``error``, ``output``, ``tool_calls``, ``duration_ms``."""
        body: dict[str, Any] = {"ok": self.ok, "output": self.output, "tool_calls": self.tool_calls}
        if self.ok:
            try:  # a budget: a snippet may return millions of values, converted on the event loop
                body["result"] = packs.json_result(self.value, self.max_bytes, MAX_RESULT_DEPTH)
            except packs.ArgumentRefused as exc:
                body["ok"] = self.ok = False
                self.error = f"ValueError: the result is too large to return ({exc}); return less"
        if not self.ok:
            body["error"] = self.error
        body["duration_ms"] = round(self.duration_ms, 3)
        return body


class PackError(Exception):
    """A pack call the host refuses (unknown tool or server, bad arguments): raised in the sandbox."""

    def __init__(self, message: str, kind: type[Exception] = AttributeError) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class _Run:
    """The packs of one run, and its deadline."""

    catalog: CatalogView
    call_tool: CallTool
    search: Search
    deadline: float
    default_timeout: float
    max_depth: int
    max_bytes: int
    handles: dict[UUID, str] = field(default_factory=dict)
    server_packs: dict[str, str] = field(default_factory=dict)
    calls: int = 0

    def inputs(self) -> dict[str, ClassInstance]:
        """Every pack as a sandbox value; local packs take precedence over servers of the same name."""
        self.server_packs = packs.server_packs(s.name for s in self.catalog.servers())
        values: dict[str, ClassInstance] = {}
        for name in [*self.server_packs, *packs.LOCAL_PACKS]:
            wrapper = ClassInstance(PackHandle(name))
            self.handles[wrapper.id] = name
            values[name] = wrapper
        return values

    def pack_names(self) -> list[str]:
        return sorted({*self.server_packs, *packs.LOCAL_PACKS})

    async def dispatch(self, pack: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Perform ``pack.method(*args, **kwargs)`` on the host."""
        if pack == "proxy":
            return self._proxy(method, args, kwargs)
        if pack == "toolmesh":
            return await self._toolmesh(method, args, kwargs)
        server = self.catalog.server_named(self.server_packs[pack])
        if server is None:
            raise PackError(f"server '{self.server_packs[pack]}' was removed", RuntimeError)
        return await self._tool(pack, server, method, args, kwargs)

    async def _tool(
        self, pack: str, server: CatalogServer, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        names = [t.name for t in self.catalog.tools_of(server.id)]
        tool = packs.match_tool(method, names)
        if tool is None:
            raise PackError(packs.unknown_tool_message(pack, method, names))
        if args:
            raise PackError(f"{pack}.{method}() takes keyword arguments only", TypeError)
        try:  # what a REST call's body may carry: as deep, as large, JSON only
            arguments = packs.json_arguments(kwargs, self.max_bytes, self.max_depth - 1)
        except packs.ArgumentRefused as exc:
            raise PackError(f"VALIDATION_ERROR: {pack}.{method}(): {exc}", ValueError) from None
        self.calls += 1
        left = self.deadline - time.monotonic()
        timeout = max(min(left, self.default_timeout), 0.001)
        request = ToolCallRequest(name=tool, server_id=server.id, arguments=arguments, timeout_seconds=timeout)
        try:
            result = await self.call_tool(request)
        except ExecutionTimeout as exc:  # the call's share of the run's budget ran out: one timeout type
            raise PackError(f"{exc.error_code}: {exc.detail}", TimeoutError) from exc
        except ToolmeshError as exc:
            raise PackError(f"{exc.error_code}: {exc.detail}", RuntimeError) from exc
        return tool_value(pack, tool, result)

    def _proxy(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if method == "list_servers" and not args and not kwargs:
            return [
                {"name": s.name, "type": s.transport.lower(), "enabled": s.status != "DISCONNECTED", "status": s.status}
                for s in self.catalog.servers()
            ]
        if method == "list_tools":
            server_name = kwargs.get("server", args[0] if args else None)
            server = self.catalog.server_named(str(server_name)) if server_name is not None else None
            if server is None:
                available = ", ".join(s.name for s in self.catalog.servers()) or "(none)"
                raise PackError(f"unknown server {server_name!r}; available servers: {available}", LookupError)
            return [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in self.catalog.tools_of(server.id)
            ]
        raise PackError(packs.unknown_tool_message("proxy", method, packs.LOCAL_PACKS["proxy"]))

    async def _toolmesh(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if method != "search":
            raise PackError(packs.unknown_tool_message("toolmesh", method, packs.LOCAL_PACKS["toolmesh"]))
        query = kwargs.get("query", args[0] if args else None)
        if not isinstance(query, str) or not query:
            raise PackError("toolmesh.search() needs a query string", TypeError)
        wanted = {
            "query": query,
            "limit": kwargs.get("limit", 10),
            "server_filter": kwargs.get("server_filter") or None,
        }
        try:
            request = SearchRequest.model_validate(wanted)
        except ValidationError as exc:  # the same VALIDATION_ERROR as search_tools and REST give
            raise PackError(_refusal("toolmesh.search", invalid_payload(exc)), ValueError) from exc
        try:
            return await self.search(request.query, request.limit, request.server_filter)
        except ToolmeshError as exc:
            raise PackError(f"{exc.error_code}: {exc.detail}", RuntimeError) from exc


def _refusal(call: str, error: ToolmeshError) -> str:
    """``VALIDATION_ERROR: call(): field: why; ...`` for arguments a pack refuses."""
    errors = error.context.get("errors", [])
    fields = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
    return f"{error.error_code}: {call}(): {fields or error.detail}"


def tool_value(pack: str, tool: str, result: dict[str, Any]) -> Any:
    """What a tool call gives a snippet: structured content, else the text; a tool error raises."""
    texts = [str(c.get("text", "")) for c in result.get("content", []) if c.get("type") == "text"]
    if result.get("isError"):
        raise PackError(f"{pack}.{tool} failed: {' '.join(texts) or 'tool error'}", RuntimeError)
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    return "\n".join(texts)


class CodeRunner:
    """Runs snippets in a pool of monty workers, started on first use."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._pool: AsyncMonty | None = None
        self._lock = asyncio.Lock()
        self._shares = WorkerShares(
            settings.code_max_workers, lambda namespace: settings.namespace_quota(namespace).code_workers
        )

    def limits(self, timeout: float) -> ResourceLimits:
        """The sandbox's limits for a run with this budget."""
        return {
            "max_feed_duration_secs": timeout,
            "max_total_sleep_secs": timeout,
            "max_memory": self._settings.code_max_memory_bytes,
            "max_recursion_depth": 200,
        }

    async def _started(self) -> AsyncMonty:
        async with self._lock:
            if self._pool is None:
                pool = AsyncMonty(
                    min_processes=1,
                    max_processes=self._settings.code_max_workers,
                    request_timeout=self._settings.code_timeout_seconds + POOL_GRACE_SECONDS,
                    checkout_timeout=self._settings.code_timeout_seconds,
                )
                await pool.__aenter__()
                self._pool = pool
            return self._pool

    async def close(self) -> None:
        """Stop the worker pool."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.__aexit__(None, None, None)
            await asyncio.sleep(SHUTDOWN_SETTLE_SECONDS)

    async def run(self, code: str, caller_packs: CallerPacks, timeout: float | None = None) -> RunResult:
        """Execute ``code`` with the caller's packs; errors (sandbox, pack, timeout) come back in the
        result, never raised."""
        budget = min(timeout or self._settings.code_timeout_seconds, self._settings.code_timeout_seconds)
        started = time.monotonic()
        state = _Run(
            caller_packs.view,
            caller_packs.call_tool,
            caller_packs.search,
            deadline=started + budget,
            default_timeout=self._settings.request_timeout_seconds,
            max_depth=self._settings.max_request_json_depth,
            max_bytes=self._settings.max_request_body_bytes,
        )
        output = CollectString(max_bytes=MAX_OUTPUT_BYTES)
        result = RunResult(ok=False)
        try:
            pool = await self._started()
            async with asyncio.timeout(budget), self._shares.worker(caller_packs.view.namespace or ""):
                async with pool.checkout(limits=self.limits(budget)) as session:
                    value = await self._drive(session, code, state, output)
            result = RunResult(ok=True, value=value)
        except TimeoutError:
            result.error = f"TimeoutError: run() exceeded its {budget:g}s budget; the work was cancelled"
        except MontyRuntimeError as exc:
            result.error = exc.display()
            if isinstance(exc.exception(), NameError):
                result.error += "\n" + packs.unknown_pack_message(_missing_name(exc), state.pack_names())
        except MontyCrashedError as exc:
            result.error = f"the sandbox worker died: {exc}"
        except MontyError as exc:
            result.error = f"{type(exc).__name__}: {exc}"
        except RuntimeError as exc:  # the pool refusing a step (a bug of ours or of monty): never the host's crash
            log.warning("code mode run failed: %s", exc)
            result.error = f"RuntimeError: {exc}"
        result.output = output.output
        result.max_bytes = self._settings.max_request_body_bytes
        result.tool_calls = state.calls
        result.duration_ms = (time.monotonic() - started) * 1000
        return result

    async def _drive(self, session: Any, code: str, state: _Run, output: CollectString) -> Any:
        snapshot = await session.feed_start(code, inputs=state.inputs(), print_callback=output)
        while not isinstance(snapshot, MontyComplete):
            object_id = getattr(snapshot, "object_id", None)
            pack = state.handles.get(object_id) if object_id is not None else None
            if isinstance(snapshot, AsyncFunctionSnapshot) and pack is not None:
                try:
                    value = await state.dispatch(pack, str(snapshot.function_name), snapshot.args, snapshot.kwargs)
                except PackError as exc:
                    snapshot = await snapshot.resume({"exception": exc.kind(str(exc))})
                else:
                    snapshot = await snapshot.resume({"return_value": value})
            elif isinstance(snapshot, AsyncNameLookupSnapshot):
                snapshot = await snapshot.resume()  # undefined: NameError / AttributeError in the sandbox
            elif isinstance(snapshot, AsyncFunctionSnapshot) and snapshot.is_os_function:
                snapshot = await snapshot.resume_not_handled()  # no host OS: file, env and clock calls refused
            elif isinstance(snapshot, AsyncFunctionSnapshot):  # a call of an undefined name
                name = str(snapshot.function_name)
                snapshot = await snapshot.resume({"exception": NameError(f"name '{name}' is not defined")})
            else:
                snapshot = await snapshot.resume_auto()
        return snapshot.output


def _missing_name(exc: MontyRuntimeError) -> str:
    message = str(exc.exception())
    parts = message.split("'")
    return parts[1] if len(parts) >= 3 else message
