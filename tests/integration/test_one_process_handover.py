"""With the gateway and the session-worker in one process (``toolmesh up``), a tool call to the
owner and the upstream's sampling request back to the client are handed over in-process: the
session-worker's ``rpc`` subscription and the gateway replica's ``client`` subscription are owned
(``LocalFirstBus``), so neither crosses NATS."""

from __future__ import annotations

import nats
import pytest
from nats.aio.msg import Msg

from tests.harness import running_system
from tests.mcp_client import session_at, text_of
from tests.peers.launch import launch_peer
from toolmesh.contracts.clients import CLIENT_PREFIX
from toolmesh.contracts.rpc import RPC_PREFIX

pytestmark = pytest.mark.integration


async def test_calls_and_server_to_client_traffic_stay_in_the_process(nats_url: str, database_url: str) -> None:
    spy = await nats.connect(nats_url)
    seen: list[str] = []

    async def record(msg: Msg) -> None:
        seen.append(msg.subject)

    try:
        async with running_system(nats_url, database_url) as system, launch_peer("stdio") as peer:
            created = await system.register("local", peer.transport_type, peer.config)
            await system.wait_connected(created["id"])
            for prefix in (f"{RPC_PREFIX}.{created['id']}", CLIENT_PREFIX):
                await spy.subscribe(f"{prefix}.>", cb=record)
            await spy.flush()
            async with session_at(system, "/mcp", sampling=True) as session:
                result = await session.call_tool("local__ask", {"question": "who answers?"})
            assert text_of(result) == "model said: echo of who answers?"
            await spy.flush()
            assert seen == []
    finally:
        await spy.close()
