"""An indexer answering forwarded searches leaves the search queue group when its serving ends, also
when it is cancelled (its task group cancels it when a sibling fails and the supervisor restarts the
indexer): a member left behind would take its share of every gateway's searches and answer none."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import nats
import pytest
from nats.errors import NoRespondersError

from tests.harness import eventually
from toolmesh.contracts.search import SearchHealthQuery
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.nats_bus import NatsBus
from toolmesh.search.catalog import Catalog
from toolmesh.search.remote import serve_search
from toolmesh.search.service import SearchService

pytestmark = pytest.mark.integration


async def _no_catalog() -> Catalog | None:
    return None


@pytest.fixture
async def bus(nats_url: str) -> AsyncIterator[NatsBus]:
    """A bus on a connection of its own."""
    nc = await nats.connect(nats_url)
    yield NatsBus(nc)
    await nc.close()


async def test_a_cancelled_search_server_leaves_no_subscription_behind(bus: NatsBus) -> None:
    health = verbs.SEARCH_HEALTH.subject(verbs.SEARCH.key)
    body = SearchHealthQuery(namespace=None).model_dump_json().encode()
    serving = asyncio.create_task(serve_search(bus, SearchService(_no_catalog, None), asyncio.Event()))

    async def answered() -> bool:
        try:
            await bus.request(health, body, timeout=5)
        except NoRespondersError:
            return False
        return True

    await eventually(answered, timeout=10, what="the search server answering")
    serving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await serving
    with pytest.raises(NoRespondersError):  # not a timeout: nobody is left in the queue group
        await bus.request(health, body, timeout=5)
