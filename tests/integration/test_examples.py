"""The standalone examples work against a running toolmesh."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.harness import running_system
from tests.peers.launch import launch_peer
from toolmesh.platform import processes

pytestmark = pytest.mark.integration
FOLLOW_TOOLS = Path(__file__).parents[2] / "examples" / "follow_tools.py"


async def test_follow_tools_replays_a_servers_tool_list(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url) as system:
        async with launch_peer("stdio") as peer:
            created = await system.register("demo", peer.transport_type, peer.config)
        await system.wait_connected(created["id"])
        argv = [sys.executable, str(FOLLOW_TOOLS), "--nats", system.settings.nats_url or "", "--from-seq", "1"]
        follower = await processes.spawn_piped([*argv, "--count", "1"], env=os.environ)
        try:
            out, err = await asyncio.wait_for(follower.communicate(), 60)
        finally:
            await processes.stop(follower, signal.SIGKILL, 0)
    assert follower.returncode == 0, err.decode()
    line = json.loads(out.decode().splitlines()[0])
    assert line["event"] == "tools.discovered" and line["server"] == "demo" and line["server_id"] == created["id"]
    assert {"echo", "add"} <= set(line["tools"]) and line["seq"] > 1
