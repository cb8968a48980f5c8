"""Admission control without servers: the gateway's slots, queue and fair share; the deadline a
routed request carries and the session-worker's checks of it; the stored answers an idempotency
key must not keep; the shedding log."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator

import pytest

from toolmesh.contracts.rpc import CallToolRpc
from toolmesh.errors import FairShareExceeded, Overloaded, QuotaExceeded
from toolmesh.platform.admission import DEADLINE_HEADER, SheddingLog, deadline_headers, deadline_passed
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.dispatch import Dispatcher
from toolmesh.platform.bus.in_process import InProcessBus
from toolmesh.platform.bus.interface import Message
from toolmesh.platform.bus.requests import ok_reply, request_owner
from toolmesh.platform.config import Settings
from toolmesh.platform.loop_lag import LoopLag
from toolmesh.platform.polling import poll_until
from toolmesh_gateway.admission import Admission, shed_reply
from toolmesh_gateway.idempotency import Stored
from toolmesh_gateway.nats_api.replies import failure
from toolmesh_session_worker.inflight import Inflight, late

pytestmark = pytest.mark.unit


def admission(limit: int, queue: int, wait: float = 60.0) -> Admission:
    return Admission(
        Settings(gateway_max_inflight_calls=limit, gateway_admission_queue=queue, gateway_admission_wait_seconds=wait),
        LoopLag(),
    )


@contextlib.asynccontextmanager
async def holding(gate: Admission, principal: str, count: int) -> AsyncIterator[list[asyncio.Event]]:
    """``count`` calls of ``principal`` holding slots until their event is set."""
    releases = [asyncio.Event() for _ in range(count)]

    async def hold(release: asyncio.Event) -> None:
        async with gate.slot(principal, 60):
            await release.wait()

    tasks = [asyncio.create_task(hold(r)) for r in releases]
    await poll_until(lambda: gate.inflight >= count, 10)
    try:
        yield releases
    finally:
        for release in releases:
            release.set()
        await asyncio.gather(*tasks)


async def test_a_full_gateway_with_no_queue_refuses_at_once_with_retry_after() -> None:
    gate = admission(limit=2, queue=0)
    async with holding(gate, "a", 2):
        with pytest.raises(Overloaded) as refused:
            async with gate.slot("a", 60):
                pass
    assert refused.value.status == 503 and refused.value.headers() == {"Retry-After": "1"}
    assert gate.inflight == 0


async def test_a_waiting_call_gets_the_slot_that_frees_and_one_waiting_too_long_is_refused() -> None:
    gate = admission(limit=1, queue=1)
    async with holding(gate, "a", 1) as releases:
        with pytest.raises(Overloaded):  # its own timeout is shorter than the wait
            async with gate.slot("a", 0):
                pass
        admitted = asyncio.Event()

        async def waiter() -> None:
            async with gate.slot("a", 60):
                admitted.set()

        task = asyncio.create_task(waiter())
        await poll_until(lambda: gate.waiting == 1, 10)
        assert not admitted.is_set()
        releases[0].set()
        await task
    assert admitted.is_set() and gate.inflight == 0


async def test_a_principal_over_its_share_is_refused_and_the_freed_slot_goes_to_the_other() -> None:
    gate = admission(limit=2, queue=4)
    async with holding(gate, "flooder", 2) as releases:
        order: list[str] = []

        async def wait_for_slot(principal: str) -> None:
            async with gate.slot(principal, 60):
                order.append(principal)

        first = asyncio.create_task(wait_for_slot("flooder"))  # queued first: nobody else waited
        await poll_until(lambda: gate.waiting == 1, 10)
        other = asyncio.create_task(wait_for_slot("other"))
        await poll_until(lambda: gate.waiting == 2, 10)
        with pytest.raises(FairShareExceeded) as refused:
            async with gate.slot("flooder", 60):
                pass
        assert refused.value.error_code == "RATE_LIMITED" and refused.value.headers() == {"Retry-After": "1"}
        releases[0].set()
        await other
        assert order == ["other"]  # the flooder still holds its share: the other principal went first
        releases[1].set()
        await first
    assert order == ["other", "flooder"] and gate.inflight == 0


async def test_a_cancelled_waiter_leaves_no_slot_taken() -> None:
    gate = admission(limit=1, queue=2)
    async with holding(gate, "a", 1) as releases:

        async def wait_for_slot() -> None:
            async with gate.slot("b", 60):
                await asyncio.Event().wait()

        task = asyncio.create_task(wait_for_slot())
        await poll_until(lambda: gate.waiting == 1, 10)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        releases[0].set()
    assert gate.inflight == 0


async def test_a_routed_request_carries_its_deadline() -> None:
    bus = InProcessBus()
    seen: list[dict[str, str]] = []

    async def owner(msg: Message) -> None:
        seen.append(dict(msg.headers or {}))
        await msg.respond(ok_reply(b"{}"))

    await bus.subscribe(verbs.CALL.subject("srv"), owner)
    try:
        await request_owner(bus, "srv", "call", b"{}", timeout=10, deadline=30)
    finally:
        await bus.close()
    assert not deadline_passed(seen[0]) and float(seen[0][DEADLINE_HEADER]) > 0


def test_a_deadline_passes_by_its_clock_and_an_unreadable_one_never() -> None:
    headers = deadline_headers(5, clock=lambda: 100.0)
    assert headers == {DEADLINE_HEADER: "105.000"}
    assert not deadline_passed(headers, clock=lambda: 104.9)
    assert deadline_passed(headers, clock=lambda: 105.1)
    assert not deadline_passed({DEADLINE_HEADER: "soon"}) and not deadline_passed(None)


def test_refusals_of_admission_control_are_not_kept_for_an_idempotency_key() -> None:
    overloaded = Overloaded("full", {"retry_after_seconds": 1, "reason": "server_full"})
    fair = FairShareExceeded("share", {"retry_after_seconds": 1, "reason": "fair_share"})
    assert shed_reply(failure(overloaded)) and shed_reply(failure(fair))
    assert shed_reply(Stored(503, '{"detail": "full", "error_code": "OVERLOADED"}'))
    assert not shed_reply(Stored(503, '{"detail": "x", "error_code": "SERVER_UNAVAILABLE"}'))
    assert not shed_reply(Stored(429, '{"detail": "x", "error_code": "RATE_LIMITED", "context": {}}'))


def test_a_quota_refusal_is_not_kept_for_an_idempotency_key() -> None:
    """Nothing ran and nothing was counted: a retry with the same key after the window reset runs the call."""
    context = {"retry_after_seconds": 9, "quota_id": "q", "limit": 5, "reset_epoch": 1}
    assert shed_reply(failure(QuotaExceeded("Quota exceeded", context)))


def test_shedding_is_logged_when_it_starts_and_when_it_stops(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    shedding = SheddingLog("gateway", logging.getLogger("test.shedding"), clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.shedding"):
        for _ in range(5):
            shedding.shed("overloaded", "full")
        shedding.admitted()
        now[0] = 60.0
        shedding.admitted()
        shedding.admitted()
    assert [r.getMessage() for r in caplog.records] == [
        "gateway is shedding load: full",
        "gateway stopped shedding load: 5 calls refused in 0s",
    ]


async def test_a_request_whose_deadline_passes_while_it_waits_is_not_executed() -> None:
    """The deadline is checked when the request arrives and again after a wait (a reconnect's hold)."""
    now = [100.0]
    inflight = Inflight(Settings(), LoopLag(), clock=lambda: now[0])
    waited = asyncio.Event()
    executed: list[str] = []

    async def held_call(key: str, body: CallToolRpc) -> bytes:
        await waited.wait()  # where the owner holds a call while its session reconnects
        if (expired := late(key)) is not None:
            raise expired
        executed.append(body.tool)
        return b"{}"

    dispatcher = Dispatcher(verbs.RPC, {verbs.CALL: held_call}, span_name="session")
    bus = InProcessBus()
    await bus.subscribe(verbs.RPC.wildcard("srv"), lambda msg: inflight.answer(dispatcher, "srv", msg))
    payload = CallToolRpc(tool="t", arguments={}, timeout_seconds=5).model_dump_json().encode()
    try:
        in_time = asyncio.create_task(
            bus.request(verbs.CALL.subject("srv"), payload, timeout=10, headers=deadline_headers(5, lambda: 100.0))
        )
        await poll_until(lambda: inflight.in_flight == 1, 10)
        now[0] = 106.0  # the caller's deadline passes during the wait
        waited.set()
        answer = json.loads(await in_time)
        arrived_late = json.loads(
            await bus.request(verbs.CALL.subject("srv"), payload, timeout=10, headers=deadline_headers(5, lambda: 0.0))
        )
    finally:
        await bus.close()
    assert answer["error"]["error_code"] == arrived_late["error"]["error_code"] == "EXECUTION_TIMEOUT"
    assert executed == []
