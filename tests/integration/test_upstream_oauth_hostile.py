"""Upstream OAuth against hostile parties: an upstream whose protected-resource metadata never ends
for a reader without a bound, and anyone on the network at ``/oauth/callback`` (reflected text,
guessed state)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.harness import running_system
from tests.peers.launch import free_port, running_process

pytestmark = pytest.mark.integration
PEERS = Path(__file__).parents[1] / "peers"
PADDING = 64 << 20
"""Whitespace before the metadata: far more than any OAuth document needs."""


@pytest.fixture
async def issuer() -> AsyncIterator[str]:
    port = free_port()
    async with running_process([sys.executable, str(PEERS / "oauth_server.py"), "--port", str(port)], port=port):
        yield f"http://127.0.0.1:{port}"


async def test_metadata_without_end_is_refused_not_read_whole(nats_url: str, database_url: str, issuer: str) -> None:
    port = free_port()
    argv = [sys.executable, str(PEERS / "hostile_oauth.py"), "--port", str(port), "--issuer", issuer]
    async with (
        running_process([*argv, "--padding", str(PADDING)], port=port),
        running_system(nats_url, database_url) as system,
    ):
        base = f"http://127.0.0.1:{port}/mcp"
        created = await system.register("hostile", "HTTP", {"base_url": base, "auth": {"mode": "oauth"}})
        answer = await system.api.post(f"/api/v1/aggregator/servers/{created['id']}/authorize")
        assert answer.status_code == 503, answer.text
        assert "protected-resource metadata" in answer.json()["detail"]


async def test_callback_reflects_no_markup_and_a_guessed_state_gets_nothing(nats_url: str, database_url: str) -> None:
    script = "<script>alert(1)</script>"
    refused = {"error": script, "error_description": script, "state": script}
    async with running_system(nats_url, database_url) as system:
        pages = [
            await system.api.get("/oauth/callback", params=refused),
            await system.api.get("/oauth/callback", params={"code": script, "state": script, "iss": script}),
            await system.api.get("/oauth/callback", params={"code": "c", "state": "A" * 43}),
        ]
    for page in pages:
        assert page.status_code == 400 and "<script>" not in page.text
        assert page.headers["cache-control"] == "no-store" and page.headers["content-type"].startswith("text/html")
