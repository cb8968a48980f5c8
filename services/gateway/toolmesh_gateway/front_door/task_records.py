"""The records of tasks (``tasks``) in the NATS KV bucket ``toolmesh_tasks``: read, created, watched,
and changed by compare-and-set, so that replicas writing one record at once lose no write.

A task's runner proves it is alive in a key of its own beside the record (``{task id}.beat``: the
runner and the time), a small blind write every few seconds, so a heartbeat neither rewrites the
record (its call's arguments, its input requests) nor wakes those who watch it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

PUBLIC = ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs")
"""The fields of a record a client sees (``Task``)."""
BEAT_SUFFIX = ".beat"
"""A task's heartbeat key is its id and this (a second token, so ``*`` watches records only)."""
TERMINAL = frozenset({"completed", "failed", "cancelled"})
"""The statuses a task never leaves."""
Change = Callable[[dict[str, Any]], dict[str, Any] | None]
"""A record in, the record to write out (None: leave it as it is)."""


def now() -> str:
    """The time as tasks' ``createdAt`` and ``lastUpdatedAt`` spell it."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parsed(value: bytes | None) -> dict[str, Any]:
    """A record as stored; ``{}`` (no task) for a value that is not a task's (not JSON, not an object,
    no status, no call nor relayed task: written by something other than a gateway replica)."""
    try:
        record = json.loads(value or b"{}")
    except ValueError:
        return {}
    if not isinstance(record, dict) or not isinstance(record.get("status"), str):
        return {}
    return record if isinstance(record.get("call"), dict) or isinstance(record.get("relayed"), dict) else {}


def detailed(record: dict[str, Any]) -> dict[str, Any]:
    """The task as ``tasks/get`` and ``notifications/tasks`` show it (``DetailedTask``)."""
    shown = {k: record[k] for k in PUBLIC if k in record}
    for part in ("result", "error", "inputRequests"):
        if part in record:
            shown[part] = record[part]
    return shown


class TaskRecords:
    """The task records of one bucket."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    async def create(self, task_id: str, record: dict[str, Any]) -> None:
        """Write a new task's record."""
        await self._kv.create(task_id, json.dumps(record).encode())

    async def read(self, task_id: str) -> dict[str, Any]:
        """The task's record; ``{}`` when there is none (gone, never written, not a possible key, not a
        task's)."""
        try:
            entry = await self._kv.get(task_id)
        except (KeyNotFoundError, ValueError):  # ValueError: not a possible key
            return {}
        return parsed(entry.value)

    async def entry(self, task_id: str) -> tuple[int, dict[str, Any]]:
        """The task's record and its revision (``(0, {})``: none, as ``read`` says)."""
        try:
            entry = await self._kv.get(task_id)
        except (KeyNotFoundError, ValueError):
            return 0, {}
        return entry.revision or 0, parsed(entry.value)

    async def beat(self, task_id: str, runner: str) -> None:
        """Say that ``runner`` runs the task now (its heartbeat)."""
        await self._kv.put(task_id + BEAT_SUFFIX, json.dumps({"runner": runner, "at": time.time()}).encode())

    async def last_beat(self, task_id: str, runner: object) -> float:
        """When ``runner`` last said it runs the task (0: never, or another runner did last)."""
        try:
            entry = await self._kv.get(task_id + BEAT_SUFFIX)
        except (KeyNotFoundError, ValueError):
            return 0.0
        try:
            beat = json.loads(entry.value or b"{}")
        except ValueError:
            return 0.0
        if not isinstance(beat, dict) or beat.get("runner") != runner or not isinstance(beat.get("at"), int | float):
            return 0.0
        return float(beat["at"])

    async def watch(self, task_id: str) -> KeyValue.KeyWatcher:
        """A watcher of the task's record (its current value first)."""
        return await self._kv.watch(task_id)

    async def change(self, task_id: str, change: Change, *, touch: bool = True) -> dict[str, Any] | None:
        """Apply ``change`` to the record (compare-and-set, again on a concurrent write); the record
        after it (None: the task is gone). ``touch``: the change is one the client sees
        (``lastUpdatedAt``), not a heartbeat."""
        while True:
            try:
                entry = await self._kv.get(task_id)
            except KeyNotFoundError:
                return None
            record = parsed(entry.value)
            if not record:
                return None
            changed = change(dict(record))
            if changed is None:
                return record
            if touch:
                changed["lastUpdatedAt"] = now()
            try:
                await self._kv.update(task_id, json.dumps(changed).encode(), last=entry.revision)
            except KeyWrongLastSequenceError:
                continue
            return changed
