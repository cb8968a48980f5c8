"""A running toolmesh with the STDIO demo peer registered and connected, for tests that call its tools."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from tests.harness import System, running_system
from tests.peers.launch import launch_peer


@contextlib.asynccontextmanager
async def running_with_peer(nats_url: str, database_url: str, name: str) -> AsyncIterator[tuple[System, str]]:
    """Every role running and the STDIO demo peer registered as ``name`` and connected; the system and its id."""
    async with running_system(nats_url, database_url) as running, launch_peer("stdio") as peer:
        server = await running.register(name, "STDIO", peer.config)
        await running.wait_connected(server["id"])
        yield running, server["id"]
