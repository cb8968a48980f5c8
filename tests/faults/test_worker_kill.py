"""SIGKILL a session-worker under a stream of tool calls: its servers move to the other worker, calls after
the failover succeed, and no call is executed twice (the upstream counts every invocation by key)."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from tests.faults.cluster import running_cluster
from tests.harness import System, eventually
from tests.peers.launch import launch_peer
from toolmesh.platform import processes
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.topology import leases_bucket
from toolmesh_cli.embedded import EmbeddedNats

CALL = "/api/v1/tools/call"
CLIENTS = 4
CALLS_AFTER_FAILOVER = 100


class Phase(IntEnum):
    """Where the test stands; each call notes the phase it started and ended in."""

    BEFORE_KILL = 0
    KILLED = 1  # the victim is SIGKILLed; the survivor has not taken its server yet
    FAILED_OVER = 2  # the survivor holds the server and has connected it


@dataclass
class Timeline:
    """The test's phase, read by the load (an ordering of events, not a measure of time)."""

    phase: Phase = Phase.BEFORE_KILL


@dataclass
class Outcome:
    """One call of the load: its key, the phases it started and ended in, and how it was answered."""

    key: str
    started: Phase
    ended: Phase
    status: int
    text: str


async def _holder_pid(system: System, server_id: str) -> int | None:
    kv = await leases_bucket(system.backends.js, system.settings.lease_ttl_seconds)
    holder = await LeaseTable(kv, "observer").holder_of(server_id)
    return int(holder.rsplit(":", 1)[1]) if holder else None


async def _load(
    systems: list[System], outcomes: list[Outcome], timeline: Timeline, stop: asyncio.Event, client: int
) -> None:
    """Sequential calls of ``tally`` with keys of their own, alternating gateways, until ``stop``."""
    for n in itertools.count():
        if stop.is_set():
            return
        key = f"c{client}-{n}"
        started = timeline.phase
        body = {"name": "counter.tally", "arguments": {"key": key}, "timeout_seconds": 20}
        response = await systems[n % 2].api.post(CALL, json=body)
        text = response.json()["content"][0]["text"] if response.status_code == 200 else response.text
        outcomes.append(Outcome(key, started, timeline.phase, response.status_code, text))


async def test_sigkilled_session_worker_loses_no_call_and_answers_none_twice(
    fault_nats: EmbeddedNats, fault_database_url: str, tmp_path: Path
) -> None:
    async with (
        launch_peer("http", name="counter") as peer,
        running_cluster(fault_nats.url, fault_database_url, tmp_path) as (cluster, systems),
    ):
        server_id = (await systems[0].register("counter", peer.transport_type, peer.config))["id"]
        await systems[0].wait_connected(server_id, timeout=60)
        victim_pid = await eventually(lambda: _holder_pid(systems[0], server_id), what="a lease on the server")
        victim = cluster.by_pid(victim_pid)
        survivor = next(w for w in cluster.of("session-worker") if w is not victim)

        outcomes: list[Outcome] = []
        timeline, stop = Timeline(), asyncio.Event()
        load = [asyncio.create_task(_load(systems, outcomes, timeline, stop, c)) for c in range(CLIENTS)]
        try:
            await eventually(lambda: _succeeded(outcomes) >= 50, what="calls before the kill")
            connects = _connects(await systems[0].history(server_id))
            timeline.phase = Phase.KILLED  # no await until the kill: every call answered from here ends after it
            processes.kill(victim.process)

            async def moved() -> bool:
                """The survivor holds the server and has opened its own session (a new connect in the history)."""
                holder = await _holder_pid(systems[0], server_id)
                return holder == survivor.pid and _connects(await systems[0].history(server_id)) > connects

            await eventually(moved, timeout=60, what="the survivor to hold and connect the server")
            timeline.phase = Phase.FAILED_OVER
            await eventually(
                lambda: (
                    sum(o.started == Phase.FAILED_OVER and o.status == 200 for o in outcomes) >= CALLS_AFTER_FAILOVER
                ),
                timeout=60,
                what="calls after the failover",
            )
        finally:
            stop.set()
            await asyncio.gather(*load)

        response = await systems[1].api.post(CALL, json={"name": "counter.tallies", "arguments": {}})
        assert response.status_code == 200, response.text
        tallies: dict[str, int] = response.json()["structuredContent"]
        assert survivor.running() and not victim.running()

    answered = [o for o in outcomes if o.status == 200]
    assert all(o.text == o.key for o in answered), [o for o in answered if o.text != o.key][:5]
    assert all(tallies.get(o.key) == 1 for o in answered), [(o.key, tallies.get(o.key)) for o in answered][:5]
    assert max(tallies.values()) == 1, {k: v for k, v in tallies.items() if v > 1}
    assert set(tallies) <= {o.key for o in outcomes}
    after = [o for o in outcomes if o.started == Phase.FAILED_OVER]
    assert after and all(o.status == 200 for o in after), [o for o in after if o.status != 200][:5]
    failed = [o for o in outcomes if o.status != 200]
    # Only calls in flight at the kill or made during the failover are refused, and only as unavailable.
    assert all(o.ended >= Phase.KILLED and o.started <= Phase.KILLED for o in failed), failed[:5]
    assert all(o.status in (503, 504) for o in failed), failed[:5]
    print(f"{len(answered)} calls answered, {len(failed)} refused during the failover")


def _connects(history: list[str]) -> int:
    return sum(1 for event in history if event in ("CONNECTED", "RECONNECT"))


def _succeeded(outcomes: list[Outcome]) -> int:
    return sum(1 for o in outcomes if o.status == 200)
