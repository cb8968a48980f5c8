"""Restart NATS (same JetStream store) and Postgres under every role as its own process: no event is lost,
and the projection catches up with the stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.faults.cluster import running_cluster
from tests.faults.events import projection_mismatch, read_events
from tests.harness import System, eventually
from tests.peers.launch import launch_peer
from toolmesh.contracts.events import ServerRegistered
from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres
from toolmesh_gateway.name_reservations import STALE_AFTER_SECONDS

SERVERS = "/api/v1/aggregator/servers"
CALL = "/api/v1/tools/call"


async def _register_stdio(system: System, name: str) -> str:
    async with launch_peer("stdio", name=name) as peer:
        return str((await system.register(name, peer.transport_type, peer.config))["id"])


async def test_nats_restart_loses_no_event_and_projections_catch_up(
    fault_nats: EmbeddedNats, fault_database_url: str, tmp_path: Path
) -> None:
    async with running_cluster(fault_nats.url, fault_database_url, tmp_path) as (cluster, systems):
        before = await _register_stdio(systems[0], "before")
        await systems[0].wait_connected(before, timeout=60)
        events_before = await read_events(systems[0])

        await fault_nats.stop()
        refused: list[int] = []
        async with launch_peer("stdio", name="during") as peer:
            body = {"name": "during", "transport_type": peer.transport_type, "connection_config": peer.config}

            async def registered() -> dict[str, Any] | None:
                """The client retries its registration until the gateway takes it (409 while the name its
                refused attempt reserved is not yet stale, ``STALE_AFTER_SECONDS``)."""
                response = await systems[1].api.post(SERVERS, json=body)
                if response.status_code == 201:
                    result: dict[str, Any] = response.json()
                    return result
                refused.append(response.status_code)
                return None

            assert await registered() is None  # NATS is down: the registration is refused, not lost
            assert refused == [503], refused
            await fault_nats.start()
            during = (await eventually(registered, timeout=STALE_AFTER_SECONDS + 30, what="the registration"))["id"]
        assert set(refused) <= {503, 409}, refused

        for system in systems:
            await system.wait_connected(before, timeout=60)
            await system.wait_connected(during, timeout=60)
        events = await read_events(systems[0])
        assert events[: len(events_before)] == events_before  # nothing published before the restart is gone
        registrations = [e["server_id"] for _, subject, e in events if subject == ServerRegistered.subject]
        assert registrations == [before, during]
        await eventually(lambda: _matches(systems[0]), timeout=60, what="the projection to match the events")
        response = await systems[0].api.post(CALL, json={"name": "during.echo", "arguments": {"text": "after"}})
        assert response.status_code == 200 and response.json()["content"][0]["text"] == "after", response.text
        assert all(r.running() for r in cluster.roles), cluster.logs()


async def test_postgres_restart_the_projector_resumes_and_catches_up(
    fault_nats: EmbeddedNats, fault_postgres: EmbeddedPostgres, fault_database_url: str, tmp_path: Path
) -> None:
    async with running_cluster(fault_nats.url, fault_database_url, tmp_path) as (cluster, systems):
        server_id = await _register_stdio(systems[0], "demo")
        detail = await systems[0].wait_connected(server_id, timeout=60)
        tools_before = detail["tool_count"]

        await fault_postgres.stop()
        # Events keep coming while Postgres is down: a tool call adds a tool and the worker publishes the new list.
        response = await systems[1].api.post(CALL, json={"name": "demo.add_tool", "arguments": {"name": "late"}})
        assert response.status_code == 200, response.text
        published = len(await read_events(systems[0]))
        await fault_postgres.start()

        async def caught_up() -> bool:
            applied = (await systems[0].server(server_id))["tool_count"] == tools_before + 1
            return applied and await projection_mismatch(systems[0]) is None

        await eventually(caught_up, timeout=60, what="the projector to apply what was published while down")
        assert len(await read_events(systems[0])) >= published
        projector = cluster.of("projector")[0]
        assert projector.running(), projector.log_tail()


async def _matches(system: System) -> bool:
    return await projection_mismatch(system) is None
