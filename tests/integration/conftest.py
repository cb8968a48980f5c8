"""The toolmesh most integration tests run against: every role in this process on the test's NATS and
database. A module that needs other roles or settings defines its own ``system`` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.harness import System, running_system


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    """Every role running with the test settings until the test ends."""
    async with running_system(nats_url, database_url) as running:
        yield running
