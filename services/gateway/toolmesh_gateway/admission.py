"""Admission control of one gateway process: a bound on the tool calls it runs at once.

A call takes one of ``TOOLMESH_GATEWAY_MAX_INFLIGHT_CALLS`` slots for as long as it runs. When
they are all taken it waits, at most ``TOOLMESH_GATEWAY_ADMISSION_WAIT_SECONDS`` (and never
longer than its own timeout), in a queue of at most ``TOOLMESH_GATEWAY_ADMISSION_QUEUE`` calls;
past either it is refused with 503 ``OVERLOADED`` and ``Retry-After``. While other principals
wait, a principal holding its fair share of the slots (the bound divided by the principals holding
or waiting for one) is refused at once with 429 ``RATE_LIMITED``; a freed slot goes to the first
waiter under its share. Each replica bounds only itself. Before any of that, while the process's
event loop runs late (its CPU cannot keep up) the bound is lowered (``toolmesh.platform.capacity``),
and a call past the lowered bound is refused at once with 503 ``OVERLOADED`` (reason ``busy``): work
the process cannot finish in time is not taken on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from toolmesh.errors import FairShareExceeded, Overloaded
from toolmesh.platform.admission import SheddingLog
from toolmesh.platform.capacity import Capacity
from toolmesh.platform.config import Settings
from toolmesh.platform.loop_lag import LoopLag
from toolmesh.platform.metrics import watch_inflight
from toolmesh_gateway.idempotency import Stored

log = logging.getLogger("toolmesh.gateway.admission")
RETRY_AFTER_SECONDS = 1
"""What a refused caller is told to wait: slots of short calls free within about that long."""
SHED = (Overloaded, FairShareExceeded)
"""The refusals of admission control (an MCP client gets them as JSON-RPC errors)."""


def shed_reply(stored: Stored) -> bool:
    """Whether a stored answer (REST's error body, or the NATS API's reply) is a refusal of admission
    control or of a durable quota: nothing ran, so an idempotency key must not keep it (a retry runs the call)."""
    if stored.status not in (Overloaded.status, FairShareExceeded.status):
        return False
    try:
        body = json.loads(stored.body)
    except ValueError:
        return False
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return False
    context = error.get("context")
    refused = isinstance(context, dict) and (context.get("reason") == "fair_share" or "quota_id" in context)
    return error.get("error_code") == Overloaded.error_code or refused


@dataclass(eq=False)
class _Waiter:
    principal: str
    granted: asyncio.Future[None]


class Admission:
    """The in-flight tool calls of this process, by principal, and the calls waiting for a slot."""

    def __init__(self, settings: Settings, lag: LoopLag) -> None:
        self._limit = settings.gateway_max_inflight_calls
        self._queue = settings.gateway_admission_queue
        self._wait = settings.gateway_admission_wait_seconds
        self._capacity = Capacity("gateway", self._limit, settings.shed_loop_lag_ms, lag)
        self._held: Counter[str] = Counter()
        self._inflight = 0
        self._waiting: deque[_Waiter] = deque()
        self._shedding = SheddingLog("gateway", log)
        watch_inflight("gateway", lambda: self._inflight)

    @property
    def inflight(self) -> int:
        """Calls holding a slot now."""
        return self._inflight

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot now."""
        return len(self._waiting)

    @contextlib.asynccontextmanager
    async def slot(self, principal: str, timeout: float) -> AsyncIterator[None]:
        """Hold a slot for ``principal`` (a key id) while the block runs; waits at most ``timeout``.

        Raises:
            FairShareExceeded: ``principal`` holds its fair share while others wait.
            Overloaded: no slot came free in time, or the queue of waiting calls is full.
        """
        await self._acquire(principal, timeout)
        try:
            yield
        finally:
            self._release(principal)

    async def _acquire(self, principal: str, timeout: float) -> None:
        if (busy := self.refuse_early()) is not None:
            raise busy
        if self._inflight < self._limit and not self._waiting:
            self._take(principal)
            self._shedding.admitted()
            return
        held = self._held[principal]
        if self._others_wait(principal) and held >= self._share():
            self._shedding.shed("fair_share", f"a principal holds its fair share of {self._limit} in-flight calls")
            raise FairShareExceeded(
                f"This key has {held} tool calls in flight, its fair share of this gateway while others wait; "
                f"retry in {RETRY_AFTER_SECONDS} s",
                {"retry_after_seconds": RETRY_AFTER_SECONDS, "reason": "fair_share", "in_flight": held},
            )
        if len(self._waiting) >= self._queue:
            raise self._overloaded("the queue of waiting calls is full")
        waiter = _Waiter(principal, asyncio.get_running_loop().create_future())
        self._waiting.append(waiter)
        try:
            done, _ = await asyncio.wait({waiter.granted}, timeout=min(self._wait, timeout))
        except asyncio.CancelledError:
            self._abandon(waiter)
            raise
        if not done:
            self._abandon(waiter)
            raise self._overloaded(f"no call ended within {min(self._wait, timeout):g} s")
        self._shedding.admitted()

    def refuse_early(self) -> Overloaded | None:
        """The refusal of a new call while this process takes fewer calls than its bound for now (its
        event loop runs late) and they are all taken; None otherwise. Cheap: the HTTP entry asks it before
        anything of a ``tools/call`` request is read."""
        if self._capacity.admits(self._inflight) or self._capacity.limit >= self._limit:
            return None
        self._shedding.shed("busy", f"its event loop runs late: {self._capacity.limit} calls at once for now")
        return Overloaded(
            f"This gateway is busy: it runs {self._capacity.limit} tool calls at once for now, its event "
            f"loop running late; retry in {RETRY_AFTER_SECONDS} s",
            {"retry_after_seconds": RETRY_AFTER_SECONDS, "reason": "busy", "max_in_flight": self._capacity.limit},
        )

    def _others_wait(self, principal: str) -> bool:
        return any(w.principal != principal for w in self._waiting)

    def _share(self) -> int:
        """The slots each principal holding or waiting for one may hold."""
        principals = {w.principal for w in self._waiting} | set(self._held)
        return max(1, self._limit // max(1, len(principals)))

    def _overloaded(self, why: str) -> Overloaded:
        self._shedding.shed("overloaded", f"{self._limit} calls in flight and {len(self._waiting)} waiting")
        return Overloaded(
            f"This gateway is at its capacity of {self._limit} tool calls in flight ({why}); "
            f"retry in {RETRY_AFTER_SECONDS} s",
            {"retry_after_seconds": RETRY_AFTER_SECONDS, "reason": "overloaded", "max_in_flight": self._limit},
        )

    def _take(self, principal: str) -> None:
        self._held[principal] += 1
        self._inflight += 1

    def _abandon(self, waiter: _Waiter) -> None:
        """A waiter left: give back the slot it was handed, or leave the queue."""
        if waiter.granted.done():
            self._release(waiter.principal)
            return
        waiter.granted.cancel()
        self._waiting.remove(waiter)

    def _release(self, principal: str) -> None:
        self._held[principal] -= 1
        if self._held[principal] <= 0:
            del self._held[principal]
        self._inflight -= 1
        if self._waiting and self._inflight < self._limit:
            waiter = self._next_waiter()
            self._waiting.remove(waiter)
            self._take(waiter.principal)
            waiter.granted.set_result(None)

    def _next_waiter(self) -> _Waiter:
        """The first waiter under its fair share (the first one when none is)."""
        share = self._share()
        return next((w for w in self._waiting if self._held[w.principal] < share), self._waiting[0])
