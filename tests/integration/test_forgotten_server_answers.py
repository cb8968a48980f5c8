"""A session-worker that lets a server go (its connect failed, its lease was lost, it stops) while
it is answering one of the server's requests still answers it: the requester hears the outcome
instead of waiting out its timeout (a remove of an OAuth server whose connect failed meanwhile was
answered ``SESSION_NOT_FOUND`` after 10 s)."""

from __future__ import annotations

import asyncio

import pytest

from tests.harness import credential_box, running_system
from tests.peers.launch import launch_peer
from toolmesh.contracts.rpc import DisconnectRpc
from toolmesh.platform.bus.requests import ask_owner
from toolmesh.platform.polling import poll_until
from toolmesh_cli.roles import ROLES, projector
from toolmesh_session_worker.worker import SessionWorker

pytestmark = pytest.mark.integration


async def test_a_disconnect_in_flight_when_its_server_is_let_go_is_answered(nats_url: str, database_url: str) -> None:
    others = [role for role in ROLES if role not in ("session-worker", "projector")]
    async with running_system(nats_url, database_url, roles=others) as system:
        box = credential_box(system.settings)
        worker, stop, projector_stop = SessionWorker(system.backends, box), asyncio.Event(), asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        projecting = asyncio.create_task(projector.run(system.backends, box, projector_stop))
        try:
            async with launch_peer("stdio") as peer:
                server_id = (await system.register("demo", peer.transport_type, peer.config))["id"]
            await system.wait_connected(server_id)
            projector_stop.set()  # the disconnect below waits for a projection that no longer moves
            await projecting
            server = worker.owned[server_id]
            asked = DisconnectRpc(force=True, actor="test")
            disconnect = asyncio.create_task(ask_owner(system.backends.bus, server_id, "disconnect", asked, timeout=15))
            assert await poll_until(lambda: server.draining, 10), "the disconnect never reached the owner"
            stop.set()  # while the owner answers the disconnect, the worker lets every server go
            assert (await disconnect)["status"] == "DISCONNECTED"
        finally:
            stop.set()
            projector_stop.set()
            await asyncio.gather(running, projecting)
