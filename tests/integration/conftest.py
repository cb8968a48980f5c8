"""The toolmesh most integration tests run against: every role in this process on the test's NATS and
database. A module that needs other roles or settings defines its own ``system`` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS

from tests.harness import System, running_system


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    """Every role running with the test settings until the test ends."""
    async with running_system(nats_url, database_url) as running:
        yield running


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[NATS]:
    """A connection of the test's own to the test's NATS (closed after the test, if the test did not
    close it)."""
    connection = await nats.connect(nats_url)
    yield connection
    await connection.close()
