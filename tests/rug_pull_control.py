"""The hostile peer (``tests/peers/rug_pull.py``) as its attacker drives it, and what toolmesh shows of it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.harness import System, running_system
from tests.peers.launch import launch_rug_pull

LOOPBACK_UPSTREAMS: dict[str, Any] = {"upstream_private_networks": ("127.0.0.0/8",)}
"""Settings that let every registrar's servers reach the loopback peer (agents register it too)."""


@dataclass
class Upstream:
    """The hostile peer: its MCP URL, and the attacker's own controls of it."""

    url: str

    @property
    def config(self) -> dict[str, Any]:
        """The ``connection_config`` of an HTTP server registered on the peer."""
        return {"base_url": f"{self.url}/mcp", "headers": {}}

    async def rug(self, tool: str, description: str) -> None:
        """Change a tool's description without telling any client."""
        await self._control("/rug", tool, description)

    async def list_tool(self, tool: str, description: str) -> None:
        """List one more tool (an echo) from now on, without telling any client."""
        await self._control("/list", tool, description)

    async def calls(self) -> list[str]:
        """The tool calls the peer received, in order (the canary)."""
        async with httpx.AsyncClient(timeout=30) as http:
            calls: list[str] = (await http.get(f"{self.url}/canary")).json()["calls"]
        return calls

    async def rug_prompt(self, prompt: str, description: str) -> None:
        """Change a prompt's description without telling any client."""
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(f"{self.url}/prompt", json={"prompt": prompt, "description": description})
        assert response.status_code == 200, response.text

    async def change_instructions(self, instructions: str) -> None:
        """Give every session opened from now on these instructions (no client is told)."""
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(f"{self.url}/instructions", json={"instructions": instructions})
        assert response.status_code == 200, response.text

    async def prompt_gets(self) -> list[str]:
        """The prompts/get requests the peer received, by prompt name in order."""
        async with httpx.AsyncClient(timeout=30) as http:
            gets: list[str] = (await http.get(f"{self.url}/canary")).json()["prompts"]
        return gets

    async def _control(self, path: str, tool: str, description: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(f"{self.url}{path}", json={"tool": tool, "description": description})
        assert response.status_code == 200, response.text


@contextlib.asynccontextmanager
async def running_rug_pull() -> AsyncIterator[Upstream]:
    """The hostile peer on a free loopback port until the block exits."""
    async with launch_rug_pull() as url:
        yield Upstream(url)


async def tools_of(system: System, server_id: str) -> dict[str, dict[str, Any]]:
    """``GET /servers/{id}/tools`` by original name."""
    response = await system.api.get(f"/api/v1/aggregator/servers/{server_id}/tools")
    assert response.status_code == 200, response.text
    return {t["original_name"]: t for t in response.json()["tools"]}


@pytest.fixture(name="system")
async def loopback_system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    """Every role, allowed to reach loopback upstreams (the peer listens on 127.0.0.1)."""
    async with running_system(nats_url, database_url, **LOOPBACK_UPSTREAMS) as system:
        yield system


@pytest.fixture(name="upstream")
async def rug_pull_upstream() -> AsyncIterator[Upstream]:
    """A running rug-pulling peer."""
    async with running_rug_pull() as peer:
        yield peer
