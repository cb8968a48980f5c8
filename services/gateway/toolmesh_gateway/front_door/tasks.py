"""Tasks (the ``io.modelcontextprotocol/tasks`` extension of MCP 2026-07-28), run by the gateway.

A client that declares the extension in a request's ``clientCapabilities`` gets a task for a
``tools/call`` of a tool whose upstream declares ``execution.taskSupport`` ``optional`` or
``required``: the answer is a ``CreateTaskResult`` at once, and the gateway runs the call in the
background, whatever era the upstream speaks. A tool that requires a task answers a client without
the extension with ``-32021``; any other call runs as it always did. A task is a record in the NATS
KV bucket ``toolmesh_tasks``, written before the ``CreateTaskResult`` leaves, so ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` work on every gateway replica:

- the replica that runs the call (the task's ``runner``) writes its status: ``working``;
  ``input_required`` with the upstream's requests to its client (sampling, elicitation, roots) as
  ``inputRequests``; ``completed`` with the tool's result (a tool error too, as ``isError``), or
  ``failed`` with a JSON-RPC error. It watches the record for the answers ``tasks/update`` wrote
  into it and for ``tasks/cancel``, on whichever replica those came, and cancels its call when the
  task was cancelled, ended or taken over elsewhere (its heartbeat lapsed);
- the runner renews a heartbeat (a key of its own: ``task_records``); a task whose runner stopped
  (its replica died) is taken over by the replica that the next ``tasks/*`` request, or a stream
  listening for it (``task_status``), reaches: the call runs again there when the tool is marked
  idempotent (``idempotentHint``), else the task fails saying so (what a shutdown or a takeover
  leaves of a task: ``task_handovers``). A call the session-worker running it lost
  (``SERVER_UNAVAILABLE``) runs once more on the same terms;
- a task is its starter's (principal and namespace): anyone else gets the ``-32602`` of a task that
  does not exist. It stays readable for ``ttlMs`` after its last change (the bucket's TTL).

A task an upstream runs itself is a record of the ``relayed`` kind: ``tasks/*`` on it go to the
upstream (``upstream_tasks``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER
from nats.errors import Error as NatsError

from toolmesh.contracts.rpc import RpcReply
from toolmesh.errors import ServerUnavailable, ToolmeshError
from toolmesh_gateway.catalog import CatalogTool
from toolmesh_gateway.front_door.client_links import ClientLink, ClientLinks, Ctx, PendingInput
from toolmesh_gateway.front_door.input_required import starter_of
from toolmesh_gateway.front_door.rpc_errors import mcp_error, nats_answers
from toolmesh_gateway.front_door.task_extension import EXTENSION, declared, missing_extension
from toolmesh_gateway.front_door.task_handovers import settle, voided
from toolmesh_gateway.front_door.task_quota import TaskQuota
from toolmesh_gateway.front_door.task_records import PUBLIC, TERMINAL, TaskRecords, detailed, now, parsed

log = logging.getLogger("toolmesh.gateway.tasks")
HEARTBEAT_SECONDS = 5.0
STALE_SECONDS = 3 * HEARTBEAT_SECONDS
"""A task whose runner has not renewed its heartbeat for this long is taken over."""
POLL_INTERVAL_MS = 500
UNKNOWN_TASK = "Unknown task"

TaskCall = Callable[[ClientLink], Awaitable[dict[str, Any]]]
"""Runs a task's tool call with a link of its own (upstream requests queue in its ``inputs``); the
MCP tool result."""
CallFactory = Callable[[Ctx, str, str, dict[str, Any]], TaskCall]
"""The call of (server id, original tool name, arguments) as the request ``ctx``'s caller makes it."""
Relay = Callable[[Ctx, str, str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""``tasks/*`` (request, method, task id, record) of a task an upstream runs (``UpstreamTasks.relay``)."""


def _unrelayed(request: PendingInput) -> RpcReply:
    words = f"the gateway could not relay {request.request.method} to the task's client (too large to keep, say)"
    return RpcReply(ok=False, error={"code": mcp_types.INTERNAL_ERROR, "message": words})


def _reply(answer: object, key: str) -> RpcReply:
    if isinstance(answer, dict):
        return RpcReply(ok=True, result=answer)
    return RpcReply(ok=False, error={"code": mcp_types.INVALID_PARAMS, "message": f"no answer to {key}"})


class Tasks:
    """Starts tasks, runs the calls of those started here (or taken over), answers ``tasks/*``."""

    def __init__(
        self,
        records: TaskRecords,
        links: ClientLinks,
        ttl_seconds: float,
        call_for: CallFactory,
        quota: TaskQuota,
        relay: Relay,
    ) -> None:
        self._records = records
        self._relay = relay
        self._links = links
        self._ttl_ms = int(ttl_seconds * 1000)
        self._call_for = call_for
        self._quota = quota
        self._running: dict[str, asyncio.Task[None]] = {}

    def install(self, server: Server[Any]) -> None:
        """Advertise the extension on ``server`` and serve its methods there."""
        server.extensions[EXTENSION] = {}
        server.add_request_handler("tasks/get", mcp_types.RequestParams, self._get)
        server.add_request_handler("tasks/update", mcp_types.RequestParams, self._update)
        server.add_request_handler("tasks/cancel", mcp_types.RequestParams, self._cancel)

    async def start(self, ctx: Ctx, server_id: str, tool: CatalogTool, arguments: dict[str, Any]) -> dict[str, Any]:
        """Record a task for this call of ``tool``, start the call here, and return the ``CreateTaskResult``
        (``LIMIT_EXCEEDED`` when the caller holds its quota of tasks on this replica already)."""
        who = starter_of(ctx)
        task_id = secrets.token_urlsafe(18)
        self._quota.take(task_id, who)
        created = now()
        record: dict[str, Any] = {
            "taskId": task_id,
            "status": "working",
            "createdAt": created,
            "lastUpdatedAt": created,
            "ttlMs": self._ttl_ms,
            "pollIntervalMs": POLL_INTERVAL_MS,
            "starter": who,
            "runner": self._links.replica,
            "heartbeat": time.time(),
            "call": {
                "server": server_id,
                "tool": tool.name,
                "arguments": arguments,
                "idempotent": bool((tool.annotations or {}).get("idempotentHint")),
            },
        }
        try:
            with nats_answers("recording a task"):
                await self._records.create(task_id, record)
        except BaseException:
            self._quota.release(task_id)
            raise
        self._spawn(task_id, ctx, record)
        return {"resultType": "task", **{k: record[k] for k in PUBLIC if k in record}}

    async def close(self) -> None:
        """Stop the calls running here and say so in their tasks at once (``task_handovers.settle``)."""
        running = dict(self._running)
        for task in running.values():
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
        await settle(self._records, running, self._links.replica)

    # -- running ---------------------------------------------------------------------------------

    def _spawn(self, task_id: str, ctx: Ctx, record: dict[str, Any]) -> None:
        call = record["call"]
        work = self._call_for(ctx, call["server"], call["tool"], dict(call["arguments"]))
        link = self._links.detached(ctx)
        runner = asyncio.ensure_future(self._run(task_id, link, work, bool(call["idempotent"])))
        self._running[task_id] = runner
        self._quota.hold(task_id, str(record["starter"]))

        def ended(_: asyncio.Future[None]) -> None:
            self._running.pop(task_id, None)
            self._quota.release(task_id)

        runner.add_done_callback(ended)

    async def _run(self, task_id: str, link: ClientLink, work: TaskCall, idempotent: bool) -> None:
        """Run the call, relay its input requests and their answers through the record, write its end."""
        watcher = await self._records.watch(task_id)
        pending: dict[str, PendingInput] = {}
        call = asyncio.ensure_future(self._attempts(work, link, idempotent))
        beat = asyncio.ensure_future(self._beat(task_id))
        asked: asyncio.Future[PendingInput] = asyncio.ensure_future(link.inputs.get())
        heard: asyncio.Future[Any] = asyncio.ensure_future(watcher.updates(timeout=None))
        orphaned = False
        try:
            while not call.done():
                waiting: set[asyncio.Future[Any]] = {call, asked, heard}
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if asked.done():
                    request = asked.result()
                    try:
                        await self._ask(task_id, request)
                    except NatsError as exc:  # a request past the bucket's message size, say: refused to the upstream
                        log.warning("a task's input request could not be recorded: %s", exc)
                        request.respond(_unrelayed(request))
                    else:
                        pending[request.request.request_id] = request
                    asked = asyncio.ensure_future(link.inputs.get())
                if heard.done():
                    entry = heard.result()
                    record = parsed(entry.value) if entry is not None else {}
                    if record and (record.get("status") in TERMINAL or record.get("runner") != self._links.replica):
                        orphaned = True  # cancelled, or ended or taken over elsewhere: this call has no task left
                        break
                    for key, answer in (record.get("answers") or {}).items():
                        if key in pending:
                            pending.pop(key).respond(_reply(answer, key))
                    heard = asyncio.ensure_future(watcher.updates(timeout=None))
            if not orphaned:
                await self._finish(task_id, call)
        finally:
            for future in (asked, heard, beat, call):
                future.cancel()
            with contextlib.suppress(Exception):
                await watcher.stop()
            self._links.forget(link)

    @staticmethod
    async def _attempts(work: TaskCall, link: ClientLink, idempotent: bool) -> dict[str, Any]:
        """The call, once more when the session-worker running it was lost and the tool is idempotent."""
        try:
            return await work(link)
        except ServerUnavailable:
            if not idempotent:
                raise
            log.info("a task's call lost its session-worker; the tool is idempotent: running it again")
            return await work(link)

    async def _ask(self, task_id: str, request: PendingInput) -> None:
        asked = {"method": request.request.method, "params": request.request.params or {}}

        def ask(record: dict[str, Any]) -> dict[str, Any] | None:
            if record["status"] in TERMINAL:
                return None
            record["inputRequests"] = {**(record.get("inputRequests") or {}), request.request.request_id: asked}
            return {**record, "status": "input_required"}

        await self._records.change(task_id, ask)

    async def _finish(self, task_id: str, call: asyncio.Future[dict[str, Any]]) -> None:
        """Write the call's end: its result, or the JSON-RPC error it failed with."""
        ending: dict[str, Any]
        try:
            result = {k: v for k, v in call.result().items() if k not in ("resultType", "ttlMs", "cacheScope")}
            ending = {"status": "completed", "result": result}
        except ToolmeshError as exc:
            ending = {"status": "failed", "error": mcp_error(exc).error.model_dump(mode="json", exclude_none=True)}
        except MCPError as exc:
            ending = {"status": "failed", "error": exc.error.model_dump(mode="json", exclude_none=True)}
        except Exception as exc:  # the call's own failure ends the task, never the gateway
            log.exception("a task's call failed")
            ending = {"status": "failed", "error": {"code": mcp_types.INTERNAL_ERROR, "message": type(exc).__name__}}

        def end(record: dict[str, Any]) -> dict[str, Any] | None:
            if record["status"] in TERMINAL:
                return None
            kept = {k: v for k, v in record.items() if k not in ("inputRequests", "answers", "statusMessage")}
            return {**kept, **ending}

        try:
            await self._records.change(task_id, end)
        except NatsError as exc:  # a result past the bucket's message size, say
            log.warning("a task's result could not be recorded: %s", exc)
            failure = {"code": mcp_types.INTERNAL_ERROR, "message": "the tool's result is too large to keep in a task"}
            ending = {"status": "failed", "error": failure}
            await self._records.change(task_id, end)

    async def _beat(self, task_id: str) -> None:
        """Renew the heartbeat while the task runs here, and rewrite the record as it is about every half
        of the bucket's TTL, so that it does not expire while the call runs."""
        mine = self._links.replica

        def keep(record: dict[str, Any]) -> dict[str, Any] | None:
            if record["status"] in TERMINAL or record.get("runner") != mine:
                return None
            return dict(record)

        since_kept = 0.0
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            since_kept += HEARTBEAT_SECONDS
            try:
                await self._records.beat(task_id, mine)
                if since_kept * 2000 >= self._ttl_ms:
                    await self._records.change(task_id, keep, touch=False)
                    since_kept = 0.0
            except NatsError as exc:  # the next beat tries again; three missed ones let another replica take over
                log.warning("a task's heartbeat was not written: %s", type(exc).__name__)

    # -- whose task --------------------------------------------------------------------------------

    async def _mine(self, ctx: Ctx, what: str, *, revive: bool = True) -> tuple[str, dict[str, Any]]:
        """The task a ``tasks/*`` request names, if its caller started it (else ``-32602``), after
        taking it over when its runner stopped (``revive``; a task about to be cancelled is not run again)."""
        if not declared(ctx):
            raise missing_extension(what)
        task_id = (ctx.params or {}).get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=f"{what} needs a taskId")
        headers = getattr(ctx.request, "headers", None)
        named = headers.get(MCP_NAME_HEADER) if headers is not None else None
        if named is not None and named.strip() != task_id:  # the routing header an intermediary may trust
            raise MCPError(code=mcp_types.HEADER_MISMATCH, message=f"the Mcp-Name header is not the {what} taskId")
        record = await self._records.read(task_id)
        if not record.get("starter") or record.get("starter") != starter_of(ctx):
            if record.get("starter"):
                log.warning("security: a task was asked for by a principal that did not start it")
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=UNKNOWN_TASK)
        return task_id, await self._revived(ctx, task_id, record) if revive else record

    async def _revived(self, ctx: Ctx, task_id: str, record: dict[str, Any]) -> dict[str, Any]:
        """The record, taken over first when it is unfinished and its runner stopped renewing it."""
        if record["status"] in TERMINAL or "relayed" in record or task_id in self._running:
            return record
        alive = max(float(record.get("heartbeat") or 0), await self._records.last_beat(task_id, record.get("runner")))
        if time.time() - alive <= STALE_SECONDS:
            return record
        call = record["call"]
        mine = self._links.replica
        claim = time.time()  # this takeover's heartbeat: the record holds it only when this request took it over

        def take_over(current: dict[str, Any]) -> dict[str, Any] | None:
            if current["status"] in TERMINAL or current.get("heartbeat") != record.get("heartbeat"):
                return None  # finished, or another request (here or on another replica) took it over first
            kept = {k: v for k, v in current.items() if k not in ("inputRequests", "answers")}
            if call["idempotent"]:
                return {**kept, "status": "working", "runner": mine, "heartbeat": claim}
            words = (
                f"the gateway replica running this task stopped; {call['tool']} is not marked idempotent, "
                "so it was not run again"
            )
            return {**kept, "status": "failed", "error": {"code": mcp_types.INTERNAL_ERROR, "message": words}}

        taken = await self._records.change(task_id, take_over, touch=False) or record
        if taken.get("runner") == mine and taken.get("heartbeat") == claim and task_id not in self._running:
            log.info("took over task %s of a replica that stopped; running %s again", task_id, call["tool"])
            self._spawn(task_id, ctx, taken)
        return taken

    async def revive(self, ctx: Ctx, task_id: str) -> None:
        """Take the task over if its runner stopped, for its starter listening for it (``task_status``)."""
        record = await self._records.read(task_id)
        if record.get("starter") == starter_of(ctx):
            await self._revived(ctx, task_id, record)

    # -- tasks/get, tasks/update, tasks/cancel ---------------------------------------------------

    async def _get(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        with nats_answers("reading a task"):
            task_id, record = await self._mine(ctx, "tasks/get")
        if "relayed" in record:
            return await self._relay(ctx, "tasks/get", task_id, record)
        return {"resultType": "complete", **detailed(record)}

    async def _update(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        with nats_answers("reading a task"):
            task_id, before = await self._mine(ctx, "tasks/update", revive=False)
            await self._revived(ctx, task_id, before)
        answers = (ctx.params or {}).get("inputResponses")
        if not isinstance(answers, dict):
            raise MCPError(code=mcp_types.INVALID_PARAMS, message="tasks/update needs inputResponses (an object)")
        if "relayed" in before:
            return await self._relay(ctx, "tasks/update", task_id, before)

        def answer(record: dict[str, Any]) -> dict[str, Any] | None:
            asked = dict(record.get("inputRequests") or {})
            given = {key: value for key, value in answers.items() if key in asked}
            if record["status"] in TERMINAL or not given:
                return None
            for key in given:
                del asked[key]
            changed = {**record, "answers": {**(record.get("answers") or {}), **given}, "inputRequests": asked}
            if not asked:
                del changed["inputRequests"]
                changed["status"] = "working"
            return changed

        with nats_answers("answering a task"):
            after = await self._records.change(task_id, answer) or {}
        outstanding = before.get("inputRequests") or {}
        lost = [key for key in answers if key in outstanding and key not in (after.get("answers") or {})]
        if lost:  # asked when the client read the task, voided before its answers were written
            raise voided(lost, after)
        return {"resultType": "complete"}

    async def _cancel(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        with nats_answers("reading a task"):
            task_id, record = await self._mine(ctx, "tasks/cancel", revive=False)
        if "relayed" in record:
            return await self._relay(ctx, "tasks/cancel", task_id, record)

        def cancel(record: dict[str, Any]) -> dict[str, Any] | None:
            if record["status"] in TERMINAL:
                return None
            kept = {k: v for k, v in record.items() if k not in ("inputRequests", "answers")}
            return {**kept, "status": "cancelled", "statusMessage": "cancelled by the client"}

        with nats_answers("cancelling a task"):
            await self._records.change(task_id, cancel)
        return {"resultType": "complete"}
