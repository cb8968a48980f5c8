"""toolmesh in front of the 2026 conformance suite's reference server, for tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tests.conformance.kit import Kit
from tests.harness import System, running_system
from tests.peers.launch import free_port, running_process


@asynccontextmanager
async def reference_system(kit: Kit, nats_url: str, database_url: str, **overrides: Any) -> AsyncIterator[System]:
    """toolmesh (``overrides``: its settings) with the reference server (both eras) running over
    Streamable HTTP and registered, connected, as ``everything``."""
    port = free_port()
    env = {"PORT": str(port), "NODE_OPTIONS": f"--require {kit.loopback}"}
    async with (
        running_process(kit.server_argv(kit.server_2026), port=port, env=env),
        running_system(nats_url, database_url, **overrides) as system,
    ):
        created = await system.register("everything", "HTTP", {"base_url": f"http://127.0.0.1:{port}/mcp"})
        await system.wait_connected(created["id"])
        yield system
