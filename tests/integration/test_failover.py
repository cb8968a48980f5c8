"""Session affinity: leases move servers to a surviving session-worker after a kill -9."""

from __future__ import annotations

import pytest

from tests.harness import RoleProcess, System, eventually, is_sandbox_wrapper, processes_running, running_system
from tests.peers.launch import DEMO_SERVER, launch_peer
from toolmesh.platform import processes
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.topology import leases_bucket

pytestmark = pytest.mark.integration


async def _holders(system: System, ids: list[str]) -> dict[str, str | None]:
    leases = LeaseTable(await leases_bucket(system.backends.js, system.settings.lease_ttl_seconds), "observer")
    return {server_id: await leases.holder_of(server_id) for server_id in ids}


def _pid_of(holder: str | None) -> int:
    assert holder is not None
    return int(holder.rsplit(":", 1)[1])


async def test_killed_session_worker_hands_its_servers_to_the_other(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        workers = [RoleProcess("session-worker", system.settings) for _ in range(2)]
        try:
            ids = []
            for i in range(4):
                async with launch_peer("stdio", name=f"fo-{i}") as peer:
                    ids.append((await system.register(f"fo-{i}", "STDIO", peer.config))["id"])
            for server_id in ids:
                await system.wait_connected(server_id)
            holders = await _holders(system, ids)
            owners = {_pid_of(h) for h in holders.values()}
            assert owners <= {w.pid for w in workers}
            victim = next(w for w in workers if w.pid in owners)
            survivor = next(w for w in workers if w is not victim)
            moved = [sid for sid, h in holders.items() if _pid_of(h) == victim.pid]
            assert len(processes_running(f"{DEMO_SERVER} --transport stdio --name fo-")) == 4

            victim.kill()

            async def all_on_survivor() -> bool:
                now = await _holders(system, ids)
                return all(h is not None and _pid_of(h) == survivor.pid for h in now.values())

            await eventually(all_on_survivor, timeout=30, what="the survivor to own every server")
            for server_id in ids:
                detail = await system.wait_connected(server_id)
                assert detail["status"] == "CONNECTED"
            for server_id in moved:

                async def reconnected(sid: str = server_id) -> bool:
                    return "RECONNECT" in await system.history(sid)

                await eventually(reconnected, timeout=30, what="the moved server to be reconnected")

            async def no_orphans() -> bool:
                demo = processes_running(f"{DEMO_SERVER} --transport stdio --name fo-")
                return len(demo) == 4 and all(_parent(pid) == survivor.pid for pid in demo)

            await eventually(no_orphans, timeout=15, what="exactly one STDIO child per server, all the survivor's")
        finally:
            for worker in workers:
                if worker.process.poll() is None:
                    assert worker.terminate() == 0, worker.stderr_text()[-3000:]
        assert not processes_running(f"{DEMO_SERVER} --transport stdio --name fo-")


def _parent(pid: int) -> int | None:
    """The process that started ``pid``'s sandbox: its nearest ancestor that is not a bubblewrap wrapper."""
    parent = processes.parent_of(pid)
    while parent is not None and is_sandbox_wrapper(parent):
        parent = processes.parent_of(parent)
    return parent
