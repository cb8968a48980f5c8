"""An upstream that lists a tool differently in each era (``tests/peers/two_faced.py``): the 2026-07-28
definition of a tool the handshake era lists too is never pinned, so no client may be shown it, and
no 2026-07-28 call may reach it under the pinned name (it is not the tool that was approved)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import ADMIN_TOKEN, System, running_system
from tests.mcp_raw import modern_call
from tests.peers.launch import free_port, running_process

pytestmark = pytest.mark.integration
TWO_FACED = Path(__file__).parents[1] / "peers" / "two_faced.py"


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    port = free_port()
    async with (
        running_system(nats_url, database_url) as running,
        running_process([sys.executable, str(TWO_FACED), "--port", str(port)], port=port),
    ):
        config = {"base_url": f"http://127.0.0.1:{port}/mcp", "headers": {}}
        created = await running.register("faces", "HTTP", config, allow_insecure=True)
        await running.wait_connected(created["id"])
        yield running


async def modern(system: System, path: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One stateless 2026-07-28 request to ``path``; its JSON-RPC answer."""
    return await modern_call(f"{system.api.base_url}{path}", method, params, token=ADMIN_TOKEN)


async def test_the_modern_definition_of_a_twin_is_shown_to_nobody(system: System) -> None:
    for path in ("/mcp", "/mcp/faces"):
        listed = await modern(system, path, "tools/list", {})
        assert "IGNORE PREVIOUS" not in str(listed), (path, listed)
    only = await modern(system, "/mcp/faces", "tools/list", {})
    assert "only_modern" in [tool["name"] for tool in only["result"]["tools"]]  # the control: the era is heard


async def test_a_modern_call_of_a_twin_does_not_reach_its_unpinned_definition(system: System) -> None:
    """A tool the handshake era lists is called through the handshake session whatever the client's
    era (``ServerDescription.reached_in_modern_era``), so its unreviewed 2026-07-28 twin never runs."""
    called = await modern(system, "/mcp/faces", "tools/call", {"name": "twin", "arguments": {}})
    assert "modern:twin" not in str(called), called
    assert "handshake:twin" in str(called), called
