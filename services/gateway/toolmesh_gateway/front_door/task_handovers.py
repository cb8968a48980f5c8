"""What becomes of a task whose runner stops before its call ends (``tasks``): at a graceful shutdown
it is handed over or failed at once, saying why in ``statusMessage`` (``settle``); a client's answers
to the input requests that a takeover voided are refused, not dropped (``voided``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

import mcp_types
from mcp.shared.exceptions import MCPError
from nats.errors import Error as NatsError

from toolmesh_gateway.front_door.task_records import TERMINAL, TaskRecords

log = logging.getLogger("toolmesh.gateway.tasks")
SETTLE_SECONDS = 2.0
"""Bound of recording, at shutdown, what becomes of one task."""


async def settle(records: TaskRecords, task_ids: Iterable[str], mine: str) -> None:
    """Record what becomes of each task whose call this replica (``mine``) stopped as it shuts down."""
    for task_id in task_ids:
        try:
            await asyncio.wait_for(records.change(task_id, lambda r: stopped(r, mine)), SETTLE_SECONDS)
        except (NatsError, TimeoutError) as exc:  # it goes stale instead, and is taken over then
            log.warning("a task's runner could not record that it stopped: %s", type(exc).__name__)


def stopped(record: dict[str, Any], mine: str) -> dict[str, Any] | None:
    """The task of a call this replica (``mine``) stopped as it shuts down: handed over when its tool is
    idempotent (stale at once: the replica asked next runs it again), else failed, saying why."""
    if record["status"] in TERMINAL or record.get("runner") != mine:
        return None
    kept = {k: v for k, v in record.items() if k not in ("inputRequests", "answers")}
    call = record["call"]
    if call.get("idempotent"):
        words = "the gateway replica running this task shut down; the replica asked next runs it again"
        return {**kept, "status": "working", "statusMessage": words, "runner": None, "heartbeat": 0}
    words = (
        f"the gateway replica running this task shut down; {call['tool']} is not marked idempotent, "
        "so it was not run again"
    )
    failure = {"code": mcp_types.INTERNAL_ERROR, "message": words}
    return {**kept, "status": "failed", "statusMessage": words, "error": failure}


def voided(keys: list[str], record: dict[str, Any]) -> MCPError:
    """The error of a ``tasks/update`` whose answers (to ``keys``) came after the input requests they
    answer were voided: the task ended, or was taken over and runs again (and asks again)."""
    status = record.get("status")
    if status in TERMINAL:
        why = f"the task is {status}"
    else:
        why = "the gateway replica running the task stopped; it runs again and asks again (tasks/get shows what)"
    words = f"tasks/update: {', '.join(keys)} no longer asked, the answers were not delivered: {why}"
    return MCPError(code=mcp_types.INVALID_PARAMS, message=words, data={"undelivered": keys, "status": status})
