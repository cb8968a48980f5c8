"""Resource URI collisions on the aggregate ``/mcp``: first come, first served.

A server registered later offering a URI another server already offers, under a name that sorts
first, must not take the URI over: reads keep going to the first server, and the listing shows the
URI once, as the first server's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import mcp_types
import pytest

from tests.harness import System, eventually, running_system
from tests.mcp_client import session_at
from tests.peers.launch import launch_peer
from toolmesh.platform.store.migrate import migration_files
from toolmesh_gateway.catalog_feed import CatalogFeed

pytestmark = pytest.mark.integration


async def _register_demo(system: System, name: str) -> str:
    """A stdio demo peer whose ``demo://readme`` starts with ``# {name}``; returns its id once connected."""
    async with launch_peer("stdio", name=name) as peer:
        created = await system.register(name, peer.transport_type, peer.config)
    await system.wait_connected(created["id"])
    return str(created["id"])


async def _readme_at(system: System, path: str) -> str:
    async with session_at(system, path) as session:
        content = (await session.read_resource("demo://readme")).contents[0]
    assert isinstance(content, mcp_types.TextResourceContents)
    return content.text.splitlines()[0]


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url) as system:
        yield system


async def test_a_later_server_with_an_earlier_name_does_not_take_a_uri_over(system: System) -> None:
    await _register_demo(system, "zeta")
    await _register_demo(system, "alpha")  # registered second, sorts first

    async def alpha_offers_it() -> bool:  # alpha's resources reached the gateway's catalog
        return await _readme_at(system, "/mcp/alpha") == "# alpha"

    await eventually(alpha_offers_it, timeout=20, what="alpha's resources in the catalog")
    assert await _readme_at(system, "/mcp") == "# zeta"
    async with session_at(system, "/mcp") as session:
        listed = [r for r in (await session.list_resources()).resources if str(r.uri) == "demo://readme"]
        templates = (await session.list_resource_templates()).resource_templates
    assert len(listed) == 1 and listed[0].meta == {"toolmesh/server": "zeta"}
    items = [t for t in templates if t.uri_template == "demo://items/{item}"]
    assert len(items) == 1 and items[0].meta == {"toolmesh/server": "zeta"}
    response = await system.api.post("/api/v1/resources/read", json={"uri": "demo://readme"})
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["routed_to"] == "zeta"
    assert response.json()["contents"][0]["text"].startswith("# zeta\n")


async def test_the_first_come_order_survives_a_reload_from_the_read_model(system: System) -> None:
    """A gateway starting later loads the order from the projected rows, not from the event it saw."""
    zeta = await _register_demo(system, "zeta")
    await _register_demo(system, "alpha")

    async def alpha_offers_it() -> bool:
        return await _readme_at(system, "/mcp/alpha") == "# alpha"

    await eventually(alpha_offers_it, timeout=20, what="alpha's resources in the catalog")
    feed = CatalogFeed(system.backends.js, system.backends.db)
    await feed.start()
    try:
        served = feed.catalog.view("default").server_for_uri("demo://readme")
    finally:
        await feed.close()
    assert served is not None and served.id == zeta


async def test_rows_of_an_older_projector_get_their_order_from_the_migration(system: System) -> None:
    """The migration's backfill finds each row's registration sequence, as the projection writes it."""
    first, second = await _register_demo(system, "zeta"), await _register_demo(system, "alpha")
    db = system.backends.db
    query = "SELECT id::text, registered_seq FROM mcp.external_servers WHERE id = ANY($1::uuid[])"
    projected = dict(await db.fetch(query, [first, second]))
    assert 0 < projected[first] < projected[second]
    await db.execute(
        "UPDATE mcp.external_servers SET registered_seq = NULL WHERE id = ANY($1::uuid[])", [first, second]
    )
    sql = next(text for _, name, text in migration_files() if name.endswith("_registration_order.sql"))
    await db.execute(sql[sql.index("UPDATE") :])
    assert dict(await db.fetch(query, [first, second])) == projected
