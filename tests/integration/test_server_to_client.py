"""Server → client traffic across processes: an upstream's sampling request travels from the
session-worker that owns it (one OS process) over NATS to the gateway holding the client's stream
(another), reaches the client (this process), and the answer goes back the same way."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.harness import RoleProcess, System, eventually, running_system
from tests.mcp_client import session_at, text_of
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def three_processes(nats_url: str, database_url: str) -> AsyncIterator[tuple[System, RoleProcess, RoleProcess]]:
    """The projector here; a session-worker and a gateway each in an OS process of their own."""
    async with running_system(nats_url, database_url, roles=["projector"]) as system:
        worker = RoleProcess("session-worker", system.settings)
        gateway = RoleProcess("gateway", system.settings)
        try:

            async def answering() -> bool:
                try:
                    return (await system.api.get("/api/v1/aggregator/health")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(answering, timeout=60, what="the gateway process to answer")
            yield system, worker, gateway
        finally:
            gateway.terminate()
            worker.terminate()


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_sampling_crosses_three_processes_and_the_answer_returns(
    nats_url: str, database_url: str, transport: str
) -> None:
    async with three_processes(nats_url, database_url) as (system, worker, gateway), launch_peer(transport) as peer:
        assert len({worker.pid, gateway.pid}) == 2
        created = await system.register("remote", peer.transport_type, peer.config)
        await system.wait_connected(created["id"])
        async with session_at(system, "/mcp", sampling=True) as session:
            result = await session.call_tool("remote__ask", {"question": "who answers?"})
        assert result.is_error is False, result
        assert text_of(result) == "model said: echo of who answers?"
        async with session_at(system, "/mcp/remote", sampling=True) as session:
            result = await session.call_tool("ask", {"question": "and here?"})
        assert text_of(result) == "model said: echo of and here?"
