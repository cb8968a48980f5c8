"""How many tasks each key holds on one gateway replica (``TOOLMESH_TASK_MAX_PER_KEY``).

A task the gateway runs is held while its call runs here. A task an upstream runs, passed through
(``upstream_tasks``), is held from before its ``tools/call`` leaves until a ``tasks/get`` or
``tasks/cancel`` relayed from here sees it end, or its lifetime in the bucket passes: so a key cannot
make an upstream start tasks, nor fill the task bucket, past the bound.
"""

from __future__ import annotations

import math
import time

from toolmesh.errors import LimitExceeded
from toolmesh_gateway.front_door.rpc_errors import mcp_error


class TaskQuota:
    """The tasks held on this replica, by task id: their starter and until when they count."""

    def __init__(self, per_key: int) -> None:
        self.per_key = per_key
        self._held: dict[str, tuple[str, float]] = {}

    def take(self, task_id: str, starter: str, seconds: float = math.inf) -> None:
        """Count ``task_id`` for ``starter`` for ``seconds`` at most (until released); the ``LIMIT_EXCEEDED``
        MCP error, and nothing counted, when ``starter`` holds ``per_key`` tasks here already."""
        clock = time.monotonic()
        for gone in [task for task, (_, until) in self._held.items() if until <= clock]:
            del self._held[gone]
        if sum(1 for holder, _ in self._held.values() if holder == starter) >= self.per_key:
            words = f"LIMIT_EXCEEDED: {self.per_key} tasks of this key run on this gateway replica already"
            raise mcp_error(LimitExceeded(words, {"task_max_per_key": self.per_key}))
        self.hold(task_id, starter, seconds)

    def hold(self, task_id: str, starter: str, seconds: float = math.inf) -> None:
        """Count ``task_id`` for ``starter`` whatever it holds already (a task taken over from a replica
        that stopped exists; it is not refused)."""
        self._held[task_id] = (starter, time.monotonic() + seconds)

    def release(self, task_id: str) -> None:
        """Stop counting ``task_id`` (it ended, or never started)."""
        self._held.pop(task_id, None)
