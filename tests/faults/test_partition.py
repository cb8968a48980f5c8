"""A session-worker cut off from NATS (a proxy severs its connections for 15 s; it and its STDIO children
keep running), and one frozen by SIGSTOP past its lease TTL, under calls with unique call ids to STDIO
servers that note every execution in a ledger: the other worker takes the servers over and calls to them
succeed again, no call is executed twice, the old owner executes no call started after the takeover, and
every server ends with exactly one STDIO process (while the cut-off worker is running, never two)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from tests.faults.cluster import ROLES, Cluster, Role, running_cluster
from tests.faults.ledger_servers import LedgerServers, Load, lease_holders
from tests.faults.nats_proxy import NatsProxy, nats_proxy
from tests.harness import System, eventually
from toolmesh_cli.embedded import EmbeddedNats

SERVERS = 6
FIRST_OWNED = 3  # registered while the victim is the only session-worker: it owns them
CLIENTS = 4
LEASE = {"lease_ttl_seconds": 4.0, "lease_renew_seconds": 1.0}
SEVER_SECONDS = 15.0
RESUME_SECONDS = 15.0  # calls to a moved server succeed again within this of the takeover
SAMPLE_SECONDS = 0.25


class Phase(IntEnum):
    BEFORE = 0
    FAULT = 1  # the victim is cut off (or stopped)
    TAKEN_OVER = 2  # the survivor holds every server the victim held
    HEALED = 3  # the partition is mended (or the victim continued)
    SETTLED = 4  # one STDIO process per server, each held by a live worker


@dataclass
class Scene:
    """Two session-workers (the victim behind the proxy) and the ledger servers, some held by each."""

    cluster: Cluster
    systems: list[System]
    proxy: NatsProxy
    victim: Role
    survivor: Role
    servers: LedgerServers
    victims: list[str]  # names of the servers the victim holds


@contextlib.asynccontextmanager
async def scene(nats: EmbeddedNats, database_url: str, tmp_path: Path) -> AsyncIterator[Scene]:
    (tmp_path / "logs").mkdir()
    (tmp_path / "ledger").mkdir()
    roles = {**ROLES, "session-worker": 0}
    async with (
        nats_proxy(nats.url) as proxy,
        running_cluster(nats.url, database_url, tmp_path / "logs", roles=roles, **LEASE) as (cluster, systems),
    ):
        victim = cluster.start("session-worker", nats_url=proxy.url)
        servers = LedgerServers(tmp_path / "ledger")
        for index in range(SERVERS):
            if index == FIRST_OWNED:
                survivor = cluster.start("session-worker")
            await systems[0].wait_connected(await servers.register(systems[0], f"s{index}"), timeout=60)
        holders = await lease_holders(systems[0], list(servers.ids.values()))
        victims = [name for name, sid in servers.ids.items() if holders[sid] == victim.pid]
        assert len(victims) >= FIRST_OWNED, (holders, victim.pid)
        yield Scene(cluster, systems, proxy, victim, survivor, servers, victims)


async def _taken_over(s: Scene) -> bool:
    holders = await lease_holders(s.systems[0], [s.servers.ids[name] for name in s.victims])
    return all(pid == s.survivor.pid for pid in holders.values())


async def _settled(s: Scene) -> bool:
    holders = await lease_holders(s.systems[0], list(s.servers.ids.values()))
    live = {s.victim.pid, s.survivor.pid}
    if not all(pid in live for pid in holders.values()) or set(s.servers.stdio_processes().values()) != {1}:
        return False
    statuses = [(await s.systems[0].server(sid))["status"] for sid in s.servers.ids.values()]
    return set(statuses) == {"CONNECTED"}


async def _sample(s: Scene, load: Load, samples: list[tuple[Phase, dict[str, int]]]) -> None:
    """STDIO processes per server, with the phase, until the load stops (a record, not a wait)."""
    while not load.stop.is_set():
        samples.append((Phase(load.phase), await asyncio.to_thread(s.servers.stdio_processes)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(load.stop.wait(), SAMPLE_SECONDS)


async def _fault_and_heal(s: Scene, load: Load, fault: str) -> None:
    """Start the fault, wait for the takeover and calls to succeed again, heal it, wait until settled."""
    await eventually(lambda: load.succeeded() >= 60, what="calls before the fault")
    load.phase = Phase.FAULT
    began = time.monotonic()
    if fault == "sever":
        s.proxy.sever()
    else:
        os.kill(s.victim.pid, signal.SIGSTOP)
    try:
        await eventually(lambda: _taken_over(s), timeout=30, what="the survivor to hold the victim's servers")
        load.phase = Phase.TAKEN_OVER
        await eventually(
            lambda: all(load.succeeded(Phase.TAKEN_OVER, name) >= 3 for name in s.victims),
            timeout=RESUME_SECONDS,
            what="calls to every moved server to succeed after the takeover",
        )
        if fault == "sever":  # the partition lasts SEVER_SECONDS, whatever the takeover took
            await asyncio.sleep(max(0.0, began + SEVER_SECONDS - time.monotonic()))
    finally:
        s.proxy.restore()
        os.kill(s.victim.pid, signal.SIGCONT)
    load.phase = Phase.HEALED
    await eventually(
        lambda: _settled(s), timeout=30, what="one STDIO process per server, connected and held by a live worker"
    )
    load.phase = Phase.SETTLED
    await eventually(lambda: load.succeeded(Phase.SETTLED) >= 60, timeout=30, what="calls after it settled")


def _problems(s: Scene, load: Load, samples: list[tuple[Phase, dict[str, int]]], fault: str) -> list[str]:
    """Every broken promise (all of them, so one run shows each)."""
    problems = []
    executions = s.servers.executions()
    twice = {key: n for key, n in executions.items() if n > 1}
    if twice:
        calls = [o for o in load.outcomes if o.key in twice]
        seen = sorted({(Phase(o.started).name, Phase(o.ended).name, o.status) for o in calls})
        problems.append(f"{len(twice)} call ids executed more than once; (started, ended, status): {seen}")
    answered = [o for o in load.outcomes if o.status == 200]
    lost = [o.key for o in answered if executions.get(o.key) != 1]
    if lost:
        problems.append(f"{len(lost)} calls answered 200 but not executed exactly once: {lost[:5]}")
    by = s.servers.executed_by()
    old = {p for o in load.outcomes if o.server in s.victims and o.started == Phase.BEFORE for p in by.get(o.key, ())}
    stale = [o for o in load.outcomes if o.started >= Phase.TAKEN_OVER and by.get(o.key, set()) & old]
    if stale:
        kinds = sorted({(Phase(o.started).name, o.status) for o in stale})
        problems.append(f"{len(stale)} calls started after the takeover ran in the old owner's processes: {kinds}")
    # Cut off, the victim still runs: self-fenced, its STDIO children are gone before its lease expires.
    watched = (Phase.TAKEN_OVER,) if fault == "sever" else ()
    doubled = sorted(
        {(p.name, name, n) for p, counts in samples if p in watched for name, n in counts.items() if n > 1}
    )
    if doubled:
        problems.append(f"servers with several STDIO processes after the takeover: {doubled[:6]}")
    after = [o for o in load.outcomes if o.started == Phase.SETTLED and o.status != 200]
    if after:
        problems.append(f"{len(after)} calls failed after it settled: {[(o.status, o.text[:80]) for o in after[:3]]}")
    if not s.survivor.running() or not s.victim.running():
        problems.append("a session-worker exited")
    return problems


async def _run(s: Scene, fault: str) -> None:
    load = Load(s.systems, list(s.servers.ids))
    samples: list[tuple[Phase, dict[str, int]]] = []
    tasks = [asyncio.create_task(load.caller(c)) for c in range(CLIENTS)]
    tasks.append(asyncio.create_task(_sample(s, load, samples)))
    try:
        await _fault_and_heal(s, load, fault)
    finally:
        load.stop.set()
        await asyncio.gather(*tasks)
    refused = sorted({(Phase(o.started).name, o.status) for o in load.outcomes if o.status != 200})
    print(f"{fault}: {load.succeeded()} calls answered of {len(load.outcomes)}; refused (phase, status): {refused}")
    problems = _problems(s, load, samples, fault)
    print("\n".join(problems))
    assert not problems, "\n".join(problems) + "\n" + s.cluster.logs()


async def test_partitioned_session_worker_fences_itself(
    fault_nats: EmbeddedNats, fault_database_url: str, tmp_path: Path
) -> None:
    async with scene(fault_nats, fault_database_url, tmp_path) as s:
        await _run(s, "sever")


async def test_session_worker_stopped_past_its_lease_serves_nothing_after(
    fault_nats: EmbeddedNats, fault_database_url: str, tmp_path: Path
) -> None:
    async with scene(fault_nats, fault_database_url, tmp_path) as s:
        await _run(s, "stop")
