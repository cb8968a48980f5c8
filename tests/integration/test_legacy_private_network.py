"""Servers registered before the egress policy (their ``server.registered`` event has no
``private_network``) keep what their registrant's role allows: the bootstrap owner's and an admin's
loopback servers still connect, an agent's stays public-only; decided by the role at registration,
the same on a projection rebuild and for rows an older projector wrote."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tests.harness import System, credential_box, eventually, make_settings, running_system
from tests.peers.canary import running_canary
from tests.peers.launch import launch_peer
from tests.projection_replay import last_event_seq, project_until, stream_and_store
from toolmesh.contracts.connection_config import TransportType
from toolmesh.contracts.events import ServerRegistered
from toolmesh.credentials import mask_config
from toolmesh.platform.store.migrate import apply_migrations, migration_files
from toolmesh_projector.projector import reset_projection

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
TEAM = "team-a"


async def create_key(system: System, name: str, role: str) -> str:
    return str((await system.create_key(name, role, namespace=TEAM))["id"])


async def publish_legacy_registration(
    system: System, actor: str, namespace: str, transport: TransportType, config: dict[str, Any]
) -> str:
    """A ``server.registered`` event as written before the egress policy (no ``private_network``)."""
    event = ServerRegistered(
        server_id=str(uuid.uuid4()),
        namespace=namespace,
        actor=actor,
        name=f"legacy-{uuid.uuid4().hex[:8]}",
        transport_type=transport,
        sealed_config=credential_box(system.settings).seal(config),
        masked_config=mask_config(config),
    )
    legacy = event.model_dump_json(exclude={"private_network"}).encode()
    assert b"private_network" not in legacy
    await system.backends.js.publish(event.subject, legacy, headers={"Nats-Msg-Id": event.event_id})

    async def projected() -> bool:
        return (await system.api.get(f"{SERVERS}/{event.server_id}")).status_code == 200

    await eventually(projected, timeout=30, what="the legacy registration to be projected")
    return event.server_id


async def private_network_flags(db: asyncpg.Pool) -> dict[str, bool]:
    rows = await db.fetch(
        "SELECT id::text AS id, connection_config->>'private_network' AS flag FROM mcp.external_servers"
    )
    return {r["id"]: r["flag"] == "true" for r in rows}


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    roles = ["gateway", "session-worker", "projector"]
    async with running_system(nats_url, database_url, roles=roles) as running:
        yield running


async def test_legacy_servers_keep_their_registrants_loopback_access_and_agents_stay_public(
    system: System, nats_url: str, database_url: str
) -> None:
    bot = await create_key(system, "bot", "agent")
    await create_key(system, "lead", "admin")
    async with launch_peer("http") as owners_peer, launch_peer("http") as admins_peer, running_canary() as canary:
        owners = await publish_legacy_registration(system, "admin", "default", TransportType.HTTP, owners_peer.config)
        admins = await publish_legacy_registration(system, "lead", TEAM, TransportType.HTTP, admins_peer.config)
        agents = await publish_legacy_registration(system, "bot", TEAM, TransportType.SSE, {"url": f"{canary.url}/sse"})
        for server_id in (owners, admins, agents):
            response = await system.api.post(f"{SERVERS}/{server_id}/connect", json={})
            assert response.status_code in (200, 202), response.text
        await system.wait_connected(owners)
        await system.wait_connected(admins)
        refused = await system.wait_status(agents, "ERROR")
        assert canary.connections == 0 and canary.requests == [], refused
    expected = {owners: True, admins: True, agents: False}
    assert await private_network_flags(system.backends.db) == expected

    # After registration the agent's key is replaced by an admin's of the same name: the registration
    # was an agent's, and a rebuild (replaying every event in order) still says so.
    assert (await system.api.delete(f"/api/v1/auth/keys/{bot}")).status_code == 204
    await create_key(system, "bot", "admin")
    assert await rebuilt_flags(nats_url, database_url) == expected


async def rebuilt_flags(nats_url: str, database_url: str) -> dict[str, bool]:
    """Drop the read model and replay the whole stream (``toolmesh projector --rebuild``); the flags then."""
    async with stream_and_store(make_settings(nats_url, database_url), "rebuild-test") as (js, db):
        last = await last_event_seq(js)
        await reset_projection(js, db)
        await project_until(js, db, last)
        return await private_network_flags(db)


async def test_rows_an_older_projector_wrote_get_the_flag_of_their_registrants_role_on_upgrade(
    system: System,
) -> None:
    bot = await create_key(system, "bot", "agent")
    await create_key(system, "lead", "admin")
    config = {"url": "http://127.0.0.1:9/sse"}
    owners = await publish_legacy_registration(system, "admin", "default", TransportType.SSE, config)
    admins = await publish_legacy_registration(system, "lead", TEAM, TransportType.SSE, config)
    agents = await publish_legacy_registration(system, "bot", TEAM, TransportType.SSE, config)
    unknown = await publish_legacy_registration(system, "nobody", TEAM, TransportType.SSE, config)
    assert (await system.api.delete(f"/api/v1/auth/keys/{bot}")).status_code == 204
    await create_key(system, "bot", "admin")  # later than the agent's registration: not its role then

    legacy_migration = next(number for number, name, _ in migration_files() if "legacy_private_network" in name)
    async with system.backends.db.acquire() as conn:
        # The read model as a projector before the egress policy left it, and the database not migrated.
        await conn.execute("UPDATE mcp.external_servers SET connection_config = connection_config - 'private_network'")
        await conn.execute("DELETE FROM public.toolmesh_migrations WHERE number = $1", legacy_migration)
        await apply_migrations(conn)
    flags = await private_network_flags(system.backends.db)
    assert flags == {owners: True, admins: True, agents: False, unknown: False}
