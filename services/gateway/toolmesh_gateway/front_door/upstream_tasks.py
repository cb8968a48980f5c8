"""Tasks an upstream runs itself, passed through (the ``io.modelcontextprotocol/tasks`` extension).

An upstream that declares the extension in ``server/discover`` (``ServerDescription.modern_tasks``)
gets a 2026-07-28 client's ``tools/call`` that declares it too in that era, as it is
(``passed_through``; ``UpstreamRequests.forward``): its ``InputRequiredResult`` reaches the client as any
relayed one does, and its ``CreateTaskResult`` becomes a task of the gateway (``adopt``): a record of
the ``relayed`` kind in the bucket of the gateway's own tasks (``toolmesh_tasks``), under an id the
gateway chose, holding the server, the upstream's task id and the task's starter. ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` of that id, on any replica, reach ``relay`` once ``Tasks`` has
checked that their caller started it (anyone else gets the ``-32602`` of a task that does not exist),
and go to the upstream in that era with its own task id. The upstream's task id never reaches the
client, and what the upstream answers is screened: a task id that is not a short string fails the
call, a status outside the extension's fails the request, and only the task's own fields pass (each
of the type it must have), with the gateway's id; its result loses the fields the call's ``redact``
policies named (kept in the record). Such a task counts in its starter's quota of tasks
(``task_quota``) from before the call leaves until it is seen to end or its lifetime passes.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

import mcp_types
from mcp.shared.exceptions import MCPError

from toolmesh.errors import ToolmeshError
from toolmesh_gateway.catalog import CatalogServer
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.front_door.client_links import ClientLinks, Ctx
from toolmesh_gateway.front_door.eras import envelope_of
from toolmesh_gateway.front_door.input_required import starter_of
from toolmesh_gateway.front_door.relayed_questions import screen_questions
from toolmesh_gateway.front_door.rpc_errors import mcp_error, nats_answers
from toolmesh_gateway.front_door.sessions import request_caller
from toolmesh_gateway.front_door.task_extension import declared
from toolmesh_gateway.front_door.task_quota import TaskQuota
from toolmesh_gateway.front_door.task_records import TERMINAL, TaskRecords, now
from toolmesh_gateway.front_door.tasks import UNKNOWN_TASK
from toolmesh_gateway.offers import ServerDescription
from toolmesh_gateway.policies.result_fields import redact_result

UPSTREAM_ID_MAX = 256
"""The longest upstream task id kept (a longer one, or one that is not a string, fails the call)."""
STATUSES = frozenset({"working", "input_required", "completed", "failed", "cancelled"})
_TEXTS = {"statusMessage": 4096, "createdAt": 64, "lastUpdatedAt": 64}
_OBJECTS = ("result", "error", "inputRequests")
_NUMBER_MAX = 2**53


def passed_through(ctx: Ctx, description: ServerDescription, method: str = "tools/call") -> bool:
    """Whether this request goes to the upstream as it is for the upstream to run a task: a
    ``tools/call`` that declares the extension, to an upstream that runs tasks itself."""
    return method == "tools/call" and description.modern_tasks and declared(ctx)


def _broken(server: str, what: str) -> MCPError:
    return MCPError(code=mcp_types.INTERNAL_ERROR, message=f"the upstream {server} answered {what}")


def screened(server: str, answer: dict[str, Any], ttl_ms: int) -> dict[str, Any]:
    """The task fields of an upstream's answer, each of its type (``ttlMs`` at most the gateway's)."""
    status = answer.get("status")
    if not isinstance(status, str) or status not in STATUSES:
        raise _broken(server, "a task without a status of the Tasks extension")
    task: dict[str, Any] = {"status": status, "ttlMs": ttl_ms}
    for key, longest in _TEXTS.items():
        if isinstance(answer.get(key), str) and len(answer[key]) <= longest:
            task[key] = answer[key]
    for key in ("ttlMs", "pollIntervalMs"):
        number = answer.get(key)
        if isinstance(number, int) and not isinstance(number, bool) and 0 <= number <= _NUMBER_MAX:
            task[key] = min(number, ttl_ms) if key == "ttlMs" else number
    for key in _OBJECTS:
        if isinstance(answer.get(key), dict):
            task[key] = answer[key]
    return task


class UpstreamTasks:
    """Records the upstream's tasks as the gateway's, and relays ``tasks/*`` on them."""

    def __init__(
        self,
        records: TaskRecords,
        forwarder: Forwarder,
        links: ClientLinks,
        view_of: Callable[[Ctx], CatalogView],
        ttl_seconds: float,
        quota: TaskQuota,
    ) -> None:
        self._records = records
        self._quota = quota
        self._forwarder = forwarder
        self._links = links
        self._view = view_of
        self._ttl_ms = int(ttl_seconds * 1000)

    def reserve(self, ctx: Ctx) -> str:
        """The id a task the upstream may start for this call will have, counted in the caller's quota
        before the call leaves (``LIMIT_EXCEEDED`` when it is full); ``unreserve`` it if no task came."""
        task_id = secrets.token_urlsafe(18)
        self._quota.take(task_id, starter_of(ctx), self._ttl_ms / 1000)
        return task_id

    def unreserve(self, task_id: str) -> None:
        """The upstream answered the call without a task: nothing to count."""
        self._quota.release(task_id)

    async def adopt(
        self, ctx: Ctx, server: CatalogServer, task_id: str, created: dict[str, Any], redact: Sequence[str] = ()
    ) -> dict[str, Any]:
        """The ``CreateTaskResult`` the client gets for the upstream's: a task recorded under the id
        ``reserve`` gave, bound to the request's caller; ``redact``: the fields its result loses."""
        upstream_id = created.get("taskId")
        if not isinstance(upstream_id, str) or not 0 < len(upstream_id) <= UPSTREAM_ID_MAX:
            raise _broken(server.name, "a task without a usable taskId")
        task = screened(server.name, created, self._ttl_ms)
        stamp = now()
        record = {
            "createdAt": stamp,
            "lastUpdatedAt": stamp,
            **{k: v for k, v in task.items() if k not in ("result", "error", "inputRequests")},
            "taskId": task_id,
            "starter": starter_of(ctx),
            "written": time.time(),
            "relayed": {"server": server.id, "taskId": upstream_id, "redact": list(redact)},
        }
        with nats_answers("recording a task"):
            await self._records.create(task_id, record)
        public = {k: v for k, v in record.items() if k not in ("starter", "written", "relayed")}
        return {"resultType": "task", **public}

    async def relay(self, ctx: Ctx, method: str, task_id: str, record: dict[str, Any]) -> dict[str, Any]:
        """``method`` (``tasks/get``, ``tasks/update``, ``tasks/cancel``) of a task the upstream runs,
        relayed to it; the caller started the task (``Tasks`` checked)."""
        relayed = record["relayed"]
        server = self._view(ctx).server(str(relayed.get("server")))
        if server is None:  # removed, or out of the caller's sight since
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=UNKNOWN_TASK)
        params = {k: v for k, v in (ctx.params or {}).items() if k not in ("_meta", "taskId")}
        params["taskId"] = relayed["taskId"]
        call_id = self._forwarder.new_call_id()
        try:
            with self._links.call(ctx, call_id) as client:
                answer = await self._forwarder.request(
                    server,
                    method,
                    params,
                    client=client,
                    call_id=call_id,
                    caller=request_caller(ctx.request),
                    envelope=envelope_of(ctx),
                )
        except ToolmeshError as exc:
            raise mcp_error(exc, ctx.session.client_capabilities) from exc
        if method == "tasks/cancel":
            self._quota.release(task_id)
        if method != "tasks/get":
            return {"resultType": "complete"}
        task = {**screened(server.name, answer, self._ttl_ms), "taskId": task_id}
        if "result" in task:
            task["result"] = redact_result(task["result"], tuple(relayed.get("redact") or ()))
        screen_questions(ctx, server.name, task.get("inputRequests"), declared_here=False)
        task.setdefault("createdAt", record.get("createdAt"))
        if task["status"] in TERMINAL:
            self._quota.release(task_id)
        await self._keep(task_id, record, task["status"])
        return {"resultType": "complete", **task}

    async def _keep(self, task_id: str, record: dict[str, Any], status: str) -> None:
        """Write the record again when its status changed, or half its time in the bucket went by, so
        that it outlives no upstream task a client still polls."""
        if status == record.get("status") and time.time() - float(record.get("written") or 0) < self._ttl_ms / 2000:
            return
        with nats_answers("keeping a task"):
            await self._records.change(task_id, lambda kept: {**kept, "status": status, "written": time.time()})
