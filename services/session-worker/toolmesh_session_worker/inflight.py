"""Admission control of one session-worker: a bound on the requests it runs at once.

Tool calls and forwarded MCP requests (the ``call`` and ``request`` verbs) of one upstream server
run at most ``TOOLMESH_WORKER_MAX_INFLIGHT_PER_SERVER`` at once, and of all its servers at most
``TOOLMESH_WORKER_MAX_INFLIGHT_CALLS``; past either the request is answered at once with 503
``OVERLOADED`` and a ``retry_after_seconds`` instead of waiting without end; while the worker's event
loop runs late, its bound in all is lowered (reason ``busy``: ``toolmesh.platform.capacity``). A request whose
``Toolmesh-Deadline`` has passed when it arrives is dropped unexecuted (its caller gave up) and
answered with ``EXECUTION_TIMEOUT``, as is one whose deadline passed while it waited for a
reconnect (``late``). Other verbs (cancel, ping, health...) are never held back.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from contextvars import ContextVar

from toolmesh.errors import ExecutionTimeout, Overloaded, ToolmeshError
from toolmesh.platform.admission import SheddingLog, deadline_passed
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.dispatch import Dispatcher, error_reply
from toolmesh.platform.bus.interface import Message
from toolmesh.platform.capacity import Capacity
from toolmesh.platform.config import Settings
from toolmesh.platform.loop_lag import LoopLag
from toolmesh.platform.metrics import record_deadline_expired, watch_inflight

log = logging.getLogger("toolmesh.session.inflight")
BOUNDED = frozenset({verbs.CALL.name, verbs.REQUEST.name})
"""The verbs that run work upstream: the ones counted and refused."""
RETRY_AFTER_SECONDS = 1
ROLE = "session_worker"
_expired: ContextVar[Callable[[], bool]] = ContextVar("toolmesh_deadline_expired", default=lambda: False)
"""Whether the deadline of the request being answered (in this task) has passed, for ``late``."""


def late(server_id: str) -> ExecutionTimeout | None:
    """The refusal of the request being answered when its caller's deadline has passed (counted)."""
    if not _expired.get()():
        return None
    record_deadline_expired(ROLE)
    return ExecutionTimeout(
        "The caller's deadline passed before the request could start; it was not executed",
        {"reason": "deadline_passed", "server_id": server_id},
    )


class Inflight:
    """The upstream work this worker runs now, by server."""

    def __init__(self, settings: Settings, lag: LoopLag, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._per_server = settings.worker_max_inflight_per_server
        self._per_worker = settings.worker_max_inflight_calls
        self._capacity = Capacity(ROLE, self._per_worker, settings.shed_loop_lag_ms, lag)
        self._by_server: Counter[str] = Counter()
        self._total = 0
        self._shedding = SheddingLog(ROLE, log)
        watch_inflight(ROLE, lambda: self._total)

    @property
    def in_flight(self) -> int:
        """Requests admitted and not finished."""
        return self._total

    async def answer(
        self, dispatcher: Dispatcher, server_id: str, msg: Message, attributes: Mapping[str, str] | None = None
    ) -> None:
        """Dispatch ``msg`` to the owner of ``server_id`` when it is admitted; else answer the refusal."""
        verb = dispatcher.verb_of(msg.subject)
        if verb is None or verb.name not in BOUNDED:
            await dispatcher.dispatch(msg, attributes)
            return
        headers = msg.headers
        _expired.set(lambda: deadline_passed(headers, self._clock))  # this answer's own task
        refusal = self._refusal(server_id)
        if refusal is not None:
            if msg.reply:
                await msg.respond(error_reply(refusal).model_dump_json().encode())
            return
        self._by_server[server_id] += 1
        self._total += 1
        try:
            await dispatcher.dispatch(msg, attributes)
        finally:
            self._by_server[server_id] -= 1
            if self._by_server[server_id] <= 0:
                del self._by_server[server_id]
            self._total -= 1

    def _refusal(self, server_id: str) -> ToolmeshError | None:
        if (expired := late(server_id)) is not None:
            return expired
        if not self._capacity.admits(self._total) and self._capacity.limit < self._per_worker:
            return self._overloaded("busy", f"{self._capacity.limit} requests at once for now, its event loop late")
        if self._by_server[server_id] >= self._per_server:
            return self._overloaded("server_full", f"{self._per_server} requests in flight to this server")
        if self._total >= self._per_worker:
            return self._overloaded("worker_full", f"{self._per_worker} requests in flight on this worker")
        self._shedding.admitted()
        return None

    def _overloaded(self, reason: str, what: str) -> Overloaded:
        self._shedding.shed(reason, what)
        return Overloaded(
            f"The session-worker is at its capacity ({what}); retry in {RETRY_AFTER_SECONDS} s",
            {"retry_after_seconds": RETRY_AFTER_SECONDS, "reason": reason},
        )
