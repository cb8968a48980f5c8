"""SIGKILL the leader of the event log in a 3-node JetStream cluster under load, every role in its own process
with ``TOOLMESH_NATS_REPLICAS=3`` and the three seed URLs: no event is lost (every registration answered
201 is in the stream, the stream keeps what it had, and the read model equals the stream after), calls
resume, and no server is without an owner (its lease key absent) for longer than one lease TTL."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

import pytest
import pytest_asyncio
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from tests.faults.cluster import running_cluster
from tests.faults.events import projection_mismatch, read_events
from tests.harness import System, eventually
from tests.nats_cluster import NatsCluster, nats_cluster
from tests.peers.launch import launch_peer
from toolmesh.contracts.events import EVENTS_STREAM, ServerRegistered
from toolmesh.platform.bus.topology import leases_bucket

CALL = "/api/v1/tools/call"
SERVERS = "/api/v1/aggregator/servers"
REPLICAS = 3
LEASE_TTL = 6.0
CALLERS = 3
RESUMED_CALLS = 30
WATCH_EVERY = 0.2


class Phase(IntEnum):
    BEFORE_KILL = 0
    KILLED = 1  # the leader of the events stream is SIGKILLed
    NEW_LEADER = 2  # the two servers left elected another


@dataclass
class Load:
    """What the load saw: calls (phase started, phase answered, status) and registrations answered 201 or refused."""

    phase: Phase = Phase.BEFORE_KILL
    calls: list[tuple[Phase, Phase, int]] = field(default_factory=list)
    registered: list[str] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def resumed(self) -> bool:
        """The last ``RESUMED_CALLS`` calls started after the new leader was elected, each answered 200."""
        after = [status for started, _, status in self.calls if started == Phase.NEW_LEADER]
        return len(after) >= RESUMED_CALLS and all(status == 200 for status in after[-RESUMED_CALLS:])


@dataclass
class Orphans:
    """For each watched server, since when its lease key has been seen absent, and the longest such stretch."""

    since: dict[str, float] = field(default_factory=dict)
    longest: dict[str, float] = field(default_factory=dict)

    def saw(self, server_id: str, owned: bool) -> None:
        now = time.monotonic()
        if owned:
            start = self.since.pop(server_id, None)
            if start is not None:
                self.longest[server_id] = max(self.longest.get(server_id, 0.0), now - start)
        else:
            self.since.setdefault(server_id, now)


@pytest_asyncio.fixture(loop_scope="session")
async def fault_nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[NatsCluster]:
    async with nats_cluster(tmp_path_factory.mktemp("nats-cluster")) as cluster:
        yield cluster


async def _call(systems: list[System], load: Load, servers: list[str]) -> None:
    for n in itertools.count():
        if load.stop.is_set():
            return
        started = load.phase
        body = {"name": f"{servers[n % len(servers)]}.echo", "arguments": {"text": str(n)}, "timeout_seconds": 15}
        response = await systems[n % 2].api.post(CALL, json=body)
        load.calls.append((started, load.phase, response.status_code))


async def _register(systems: list[System], load: Load, config: dict[str, object]) -> None:
    """Registers a server of its own name after another and removes it again (each step appends events), until
    stopped; removing keeps the deployment under its server limit however long the election takes."""
    for n in itertools.count():
        if load.stop.is_set():
            return
        body = {"name": f"late{n}", "transport_type": "STDIO", "connection_config": config}
        response = await systems[n % 2].api.post(SERVERS, json=body)
        if response.status_code != 201:
            load.refused.append(response.status_code)
            continue
        server_id = response.json()["id"]
        load.registered.append(server_id)
        removed = await _remove(systems[(n + 1) % 2], server_id)
        if removed != 204:
            load.refused.append(removed)


async def _remove(system: System, server_id: str) -> int:
    """DELETE the server, again while it answers 404: a write is answered once the projector applied it or
    after ``projection_wait_seconds``, and in an election the projector can be further behind than that."""

    async def removed() -> int | None:
        status = (await system.api.delete(f"{SERVERS}/{server_id}")).status_code
        return None if status == 404 else status

    return await eventually(removed, timeout=60, what=f"the removal of {server_id}")


async def _watch_leases(kv: KeyValue, server_ids: list[str], orphans: Orphans, stop: asyncio.Event) -> None:
    """Reads every watched server's lease key in turn; a read that fails (no leader yet) tells nothing."""
    while not stop.is_set():
        for server_id in server_ids:
            try:
                entry = await asyncio.wait_for(kv.get(server_id), 1.0)
                orphans.saw(server_id, bool(entry.value))
            except KeyNotFoundError:
                orphans.saw(server_id, False)
            except Exception:  # a timeout or a 503 while the bucket elects a leader: unknown
                continue
        await asyncio.sleep(WATCH_EVERY)


async def _leader(system: System) -> str | None:
    try:
        info = await asyncio.wait_for(system.backends.js.stream_info(EVENTS_STREAM), 2.0)
    except Exception:  # no leader to answer yet
        return None
    return info.cluster.leader if info.cluster else None


async def test_sigkill_of_the_event_log_leader_loses_no_event_and_calls_resume(
    fault_nats_cluster: NatsCluster, fault_database_url: str, tmp_path: Path
) -> None:
    nats = fault_nats_cluster
    overrides = {"nats_replicas": REPLICAS, "lease_ttl_seconds": LEASE_TTL, "lease_renew_seconds": 1.0}
    async with (
        launch_peer("stdio", name="demo") as peer,
        running_cluster(nats.seed_urls, fault_database_url, tmp_path, **overrides) as (cluster, systems),
    ):
        checker = systems[0]
        info = await checker.backends.js.stream_info(EVENTS_STREAM)
        assert info.config.num_replicas == REPLICAS and info.cluster is not None, info
        servers = {f"s{i}": (await checker.register(f"s{i}", peer.transport_type, peer.config))["id"] for i in range(3)}
        for server_id in servers.values():
            await checker.wait_connected(server_id, timeout=60)
        kv = await leases_bucket(checker.backends.js, LEASE_TTL, replicas=REPLICAS)
        assert (await kv.status()).stream_info.config.num_replicas == REPLICAS

        load, orphans, watching = Load(), Orphans(), asyncio.Event()
        tasks = [asyncio.create_task(_call(systems, load, list(servers))) for _ in range(CALLERS)]
        tasks.append(asyncio.create_task(_register(systems, load, peer.config)))
        tasks.append(asyncio.create_task(_watch_leases(kv, list(servers.values()), orphans, watching)))
        try:
            await eventually(lambda: len(load.registered) >= 2 and len(load.calls) >= 30, what="load before the kill")
            victim = await eventually(lambda: _leader(checker), what="the leader of the events stream")
            events_before = await read_events(checker)
            load.phase = Phase.KILLED
            nats.kill(victim)

            async def new_leader() -> str | None:
                leader = await _leader(checker)
                return leader if leader not in (None, victim) else None

            await eventually(new_leader, timeout=45, what="a new leader of the events stream")
            load.phase = Phase.NEW_LEADER
            registered_then = len(load.registered)
            await eventually(load.resumed, timeout=60, what=f"{RESUMED_CALLS} calls in a row after the election")
            await eventually(lambda: len(load.registered) > registered_then, timeout=60, what="a registration after")
        finally:
            load.stop.set()
            watching.set()
            await asyncio.gather(*tasks)

        events = await read_events(checker)
        assert events[: len(events_before)] == events_before  # nothing the stream had is gone
        in_stream = {e["server_id"] for _, subject, e in events if subject == ServerRegistered.subject}
        assert set(servers.values()) | set(load.registered) <= in_stream  # every 201 has its event
        await eventually(lambda: _projected(checker), timeout=60, what="the read model to equal the stream")
        for server_id in servers.values():
            await checker.wait_connected(server_id, timeout=30)
        assert all(r.running() for r in cluster.roles), cluster.logs()

    assert max(orphans.longest.values(), default=0.0) <= LEASE_TTL, orphans.longest
    assert not orphans.since, f"still without an owner at the end: {orphans.since}"
    failed = [(answered, status) for _, answered, status in load.calls if status != 200]
    assert all(answered >= Phase.KILLED for answered, _ in failed), failed[:5]  # nothing failed before the kill
    assert {status for _, status in failed} <= {503, 504}, failed[:5]
    assert set(load.refused) <= {503, 504}, load.refused
    print(
        f"victim {victim}: {len(load.calls)} calls, {len(failed)} refused in the election; "
        f"{len(load.registered)} registrations, {len(load.refused)} refused; "
        f"longest stretch without an owner {orphans.longest}"
    )


async def _projected(system: System) -> bool:
    return await projection_mismatch(system) is None
