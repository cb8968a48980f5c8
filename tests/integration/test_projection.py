"""The event backbone and the Postgres projection: idempotent, rebuildable, resumable."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from tests.harness import RoleProcess, eventually, make_settings, running_system
from tests.peers.launch import launch_peer
from tests.projection_replay import applied_through, last_event_seq, project_until, stream_and_store
from toolmesh.contracts.connection_config import TransportType
from toolmesh.contracts.events import EVENTS_STREAM, ServerRegistered
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.store.queries import applied_sequence
from toolmesh_projector.projector import reset_projection

pytestmark = pytest.mark.integration
TABLES = {
    "mcp.external_servers": "id",
    "mcp.tools": "id",
    "mcp.server_connection_history": "id",
    "mcp.audit_log": "id",
    "mcp.applied_events": "stream_seq",
    "mcp.projector_checkpoint": "projector",
}


def _registered(name: str, event_id: str | None = None, description: str | None = None) -> ServerRegistered:
    extra = {"event_id": event_id} if event_id else {}
    return ServerRegistered(
        server_id=str(uuid.uuid4()),
        name=name,
        transport_type=TransportType.STDIO,
        sealed_config="sealed",
        masked_config={"command": "x"},
        description=description,
        **extra,
    )


async def _dump(db: asyncpg.Pool) -> dict[str, list[tuple[object, ...]]]:
    return {
        table: [tuple(r) for r in await db.fetch(f"SELECT * FROM {table} ORDER BY {key}")]
        for table, key in TABLES.items()
    }


async def test_event_published_twice_is_applied_once(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, roles=["projector"]) as system:
        js = system.backends.js
        event = _registered("twice", event_id="6f1c1c3a-0000-4000-8000-0000000000aa")
        first = await publish_event(js, event)
        again = await publish_event(js, event)  # JetStream deduplicates by Nats-Msg-Id
        assert again == first
        # Past the duplicate window the same event arrives as a new message: the projector skips it.
        raw = await js.publish(event.subject, event.model_dump_json().encode(), headers={"Nats-Msg-Id": "other"})
        assert raw.seq > first
        await eventually(lambda: applied_through(system.backends.db, raw.seq), what="checkpoint")
        db = system.backends.db
        assert await db.fetchval("SELECT count(*) FROM mcp.external_servers WHERE name = 'twice'") == 1
        assert await db.fetchval("SELECT count(*) FROM mcp.server_connection_history") == 1
        assert await db.fetchval("SELECT count(*) FROM mcp.audit_log") == 1


async def test_an_event_the_database_cannot_store_is_skipped_not_blocking(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, roles=["projector"]) as system:
        js = system.backends.js
        await publish_event(js, _registered("poison", description="a\u0000b"))  # Postgres text cannot hold NUL
        after = await publish_event(js, _registered("healthy"))
        await eventually(lambda: applied_through(system.backends.db, after), what="the event behind the poison one")
        db = system.backends.db
        names = {r["name"] for r in await db.fetch("SELECT name FROM mcp.external_servers")}
        assert names == {"healthy"}
        assert await db.fetchval("SELECT count(*) FROM mcp.audit_log WHERE server_name = 'poison'") == 0


async def test_rebuild_reproduces_projection_exactly(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url) as system:
        async with launch_peer("stdio") as peer:
            created = await system.register("alpha", "STDIO", peer.config)
            await system.wait_connected(created["id"])
            second = await system.register("beta", "STDIO", peer.config, auto_connect=False)
            response = await system.api.post(f"/api/v1/aggregator/servers/{created['id']}/disconnect", json={})
            assert response.status_code == 200
            await system.wait_status(created["id"], "DISCONNECTED")
            assert (await system.api.delete(f"/api/v1/aggregator/servers/{second['id']}")).status_code == 204

    # Every role has stopped: the stream is final. Project all of it, then drop and replay it.
    async with stream_and_store(make_settings(nats_url, database_url), "rebuild-test") as (js, db):
        last = await last_event_seq(js)
        await project_until(js, db, last)
        before = await _dump(db)
        assert before["mcp.tools"], "the peer's tools should be projected"
        await reset_projection(js, db)
        assert await applied_sequence(db) == 0
        await project_until(js, db, last)
        assert await _dump(db) == before


async def test_projector_killed_mid_stream_resumes_without_gap(nats_url: str, database_url: str) -> None:
    settings = make_settings(nats_url, database_url)
    async with stream_and_store(settings, "publisher") as (js, db):
        count = 400
        for i in range(count):
            last = await publish_event(js, _registered(f"server-{i:04d}"))
        projector = RoleProcess("projector", settings)
        await eventually(lambda: _past(db, 40), timeout=60, what="the projector to start applying")
        projector.kill()
        stopped_at = await applied_sequence(db)
        assert stopped_at < last, "the projector should have been killed mid-stream"
        resumed = RoleProcess("projector", settings)
        try:
            await eventually(lambda: applied_through(db, last), timeout=120, what="the projector to catch up")
        finally:
            assert resumed.terminate() == 0
        assert await db.fetchval("SELECT count(*) FROM mcp.external_servers") == count
        seqs = [r["stream_seq"] for r in await db.fetch("SELECT stream_seq FROM mcp.applied_events ORDER BY 1")]
        stream = await js.stream_info(EVENTS_STREAM)
        assert seqs == list(range(stream.state.first_seq, last + 1))


async def _past(db: asyncpg.Pool, seq: int) -> bool:
    return await applied_sequence(db) > seq
