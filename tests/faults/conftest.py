"""NATS and Postgres of the fault tests: always embedded and owned here, so tests may stop and restart them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres


@pytest_asyncio.fixture(scope="package", loop_scope="session")
async def fault_postgres(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[EmbeddedPostgres]:
    """A Postgres server of the fault tests alone (restarting it disturbs no other test)."""
    async with EmbeddedPostgres(tmp_path_factory.mktemp("fault-postgres")) as server:
        yield server


@pytest_asyncio.fixture(loop_scope="session")
async def fault_database_url(fault_postgres: EmbeddedPostgres) -> AsyncIterator[str]:
    """A fresh database on the fault tests' Postgres; dropped afterwards."""
    name = f"t_{uuid.uuid4().hex}"
    url = await fault_postgres.ensure_database(name)
    yield url
    await fault_postgres.start()  # a test may have left it stopped
    conn = await asyncpg.connect(fault_postgres.url, timeout=10)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest_asyncio.fixture(loop_scope="session")
async def fault_nats(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[EmbeddedNats]:
    """A NATS server (JetStream) for one test, which it may stop and start again on the same store."""
    async with EmbeddedNats(tmp_path_factory.mktemp("fault-nats")) as server:
        yield server
