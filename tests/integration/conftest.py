"""The toolmesh most integration tests run against: every role in this process on the test's NATS and
database (a module that needs other roles or settings defines its own ``system`` fixture); a NATS
connection of the test's own; and the OAuth-protected MCP peer."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS

from tests.harness import System, running_system
from tests.oauth_peer import PEER, Peer
from tests.peers.launch import free_port, running_process


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    """Every role running with the test settings until the test ends."""
    async with running_system(nats_url, database_url) as running:
        yield running


@pytest.fixture
async def peer() -> AsyncIterator[Peer]:
    """The OAuth-protected MCP peer (``tests/peers/oauth_server.py``), its signed-in user ``alice``."""
    port = free_port()
    async with running_process([sys.executable, str(PEER), "--port", str(port), "--user", "alice"], port=port):
        yield Peer(f"http://127.0.0.1:{port}")


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[NATS]:
    """A connection of the test's own to the test's NATS (closed after the test, if the test did not
    close it)."""
    connection = await nats.connect(nats_url)
    yield connection
    await connection.close()
