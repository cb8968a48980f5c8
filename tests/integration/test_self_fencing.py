"""A session-worker keeps its leases while its event loop is busy, and stops serving a server by its
own clock once the server's lease went unrenewed past the safety point (before the bucket could let
another worker claim it)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import nats
import pytest

from tests.harness import System, credential_box, eventually, running_system
from tests.peers.launch import launch_peer
from toolmesh.contracts.rpc import PingRpc
from toolmesh.errors import ServerUnavailable, SessionNotFound
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.local_first import LocalFirstBus
from toolmesh.platform.bus.nats_bus import NatsBus
from toolmesh.platform.bus.requests import ask_owner
from toolmesh.platform.bus.topology import leases_bucket
from toolmesh_cli.roles import ROLES
from toolmesh_session_worker.owned import OwnedServer
from toolmesh_session_worker.worker import SessionWorker

pytestmark = pytest.mark.integration


@dataclass
class Owner:
    system: System
    worker: SessionWorker
    server_id: str

    @property
    def server(self) -> OwnedServer:
        return self.worker.owned[self.server_id]

    async def holder(self) -> str | None:
        kv = await leases_bucket(self.system.backends.js, self.system.settings.lease_ttl_seconds)
        return await LeaseTable(kv, "observer").holder_of(self.server_id)

    async def pause_renewer(self) -> None:
        """Close the renewer's own NATS connection: its renewals fail from now on."""
        renewer = self.worker.renewer
        assert renewer is not None and renewer.loop is not None and renewer.nc is not None
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(renewer.nc.close(), renewer.loop))


@pytest.fixture
async def owner(nats_url: str, database_url: str) -> AsyncIterator[Owner]:
    """A session-worker of the test's own holding a STDIO server, beside every other role."""
    others = [role for role in ROLES if role != "session-worker"]
    async with running_system(nats_url, database_url, roles=others) as system:
        worker, stop = SessionWorker(system.backends, credential_box(system.settings)), asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        try:
            async with launch_peer("stdio") as peer:
                server_id = (await system.register("demo", peer.transport_type, peer.config))["id"]
            await system.wait_connected(server_id)
            yield Owner(system, worker, server_id)
        finally:
            stop.set()
            await running


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _hold_loop(seconds: float, until: Callable[[], bool], *, always: Callable[[], bool] = lambda: True) -> None:
    """Hold the event loop (as SIGSTOP, or a long CPU-bound stretch, would) for at least ``seconds`` and
    until ``until()``, checking ``always()`` meanwhile; fail after ten times ``seconds``."""
    held = time.monotonic()
    while time.monotonic() - held < seconds or not until():
        assert always(), f"broken {time.monotonic() - held:.1f}s into the hold"
        assert time.monotonic() - held < 10 * seconds, "the condition never came"
        time.sleep(0.05)


async def test_a_worker_whose_renewals_fail_steps_down_and_kills_the_stdio_child(owner: Owner) -> None:
    server = owner.server
    pid = server.session.pid if server.session else None
    assert pid is not None and not _gone(pid)
    await owner.pause_renewer()
    await eventually(lambda: owner.worker.owned.get(owner.server_id) is not server, what="the worker to step down")
    assert server.session is None
    await eventually(lambda: _gone(pid), timeout=10, what="the STDIO child to be killed")


async def test_a_request_buffered_while_the_worker_was_paused_past_the_safety_point_is_refused(owner: Owner) -> None:
    server = owner.server
    await owner.pause_renewer()
    ping = asyncio.create_task(
        ask_owner(owner.system.backends.bus, owner.server_id, "ping", PingRpc(timeout_seconds=5), timeout=10)
    )
    # The ping is sent, and reaches the owner, only once the loop runs again: after the lease passed
    # the safety point and the bucket's TTL.
    _hold_loop(owner.system.settings.lease_ttl_seconds, lambda: not server.lease_valid())
    with pytest.raises((ServerUnavailable, SessionNotFound)):
        await ping


async def test_leases_are_renewed_while_the_event_loop_is_blocked(owner: Owner) -> None:
    server = owner.server
    # Only the renewer's own thread can keep the lease while the worker's loop is held.
    _hold_loop(2 * owner.system.settings.lease_ttl_seconds, lambda: True, always=server.lease_valid)
    assert await owner.holder() == owner.system.backends.process_id
    assert owner.worker.owned.get(owner.server_id) is server
    pong = await ask_owner(owner.system.backends.bus, owner.server_id, "ping", PingRpc(timeout_seconds=5), timeout=10)
    assert pong["response_time_ms"] >= 0


async def test_a_worker_whose_own_connection_is_down_stops_renewing_and_steps_down(
    nats_url: str, database_url: str
) -> None:
    others = [role for role in ROLES if role != "session-worker"]
    async with running_system(nats_url, database_url, roles=others) as system:
        nc = await nats.connect(nats_url)  # the worker's own connection, on which its requests arrive
        backends = dataclasses.replace(system.backends, nc=nc, bus=LocalFirstBus(NatsBus(nc)), js=nc.jetstream())
        worker, stop = SessionWorker(backends, credential_box(system.settings)), asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        try:
            async with launch_peer("stdio") as peer:
                server_id = (await system.register("demo", peer.transport_type, peer.config))["id"]
            await system.wait_connected(server_id)
            server = worker.owned[server_id]
            pid = server.session.pid if server.session else None
            assert pid is not None
            await nc.close()  # the renewer's connection stays up
            await eventually(lambda: server_id not in worker.owned, what="the worker to step down")
            await eventually(lambda: _gone(pid), timeout=10, what="the STDIO child to be killed")
        finally:
            stop.set()
            await running
