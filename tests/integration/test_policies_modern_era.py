"""Policies on the ``/mcp`` path that relays a 2026-07-28 client's call itself (an upstream that speaks
only that era): denied before the upstream, redacted after it, like every other surface."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.harness import ADMIN_TOKEN, System, running_system
from tests.mcp_raw import modern_call
from tests.peers.launch import free_port, running_process

pytestmark = pytest.mark.integration
MODERN_ONLY = Path(__file__).parents[1] / "peers" / "modern_only.py"


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    port = free_port()
    async with (
        running_system(nats_url, database_url) as running,
        running_process([sys.executable, str(MODERN_ONLY), "--port", str(port)], port=port),
    ):
        config = {"base_url": f"http://127.0.0.1:{port}/mcp", "headers": {}}
        created = await running.register("modern", "HTTP", config, allow_insecure=True, new_tools="auto")
        await running.wait_connected(created["id"])
        yield running


async def test_a_relayed_modern_call_is_denied_by_a_policy(system: System) -> None:
    url = f"{system.api.base_url}/mcp"
    before = await modern_call(
        url, "tools/call", {"name": "modern__echo", "arguments": {"text": "hi"}}, token=ADMIN_TOKEN
    )
    assert "echo: hi" in json.dumps(before), before
    policy = {"name": "no-echo", "expression": 'tool.name == "echo"', "effect": "deny", "reason": "No echoes"}
    assert (await system.api.post("/api/v1/policies", json=policy)).status_code == 201
    after = await modern_call(
        url, "tools/call", {"name": "modern__echo", "arguments": {"text": "hi"}}, token=ADMIN_TOKEN
    )
    assert "POLICY_DENIED" in json.dumps(after) and "echo: hi" not in json.dumps(after), after
