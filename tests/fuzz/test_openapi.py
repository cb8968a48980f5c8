"""Schema-driven fuzzing of the REST API (schemathesis against ``/openapi.json``): no 5xx, as each principal.

Bounded by ``tests.fuzz.runner.FuzzBudget`` (about a minute per principal; ``TOOLMESH_FUZZ_*``
widen it). Every 5xx it ever found has a regression test in tests/integration/test_fuzz_regressions.py.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from tests.fuzz.runner import FuzzBudget, FuzzTarget, fuzz
from tests.harness import ADMIN_TOKEN, System, running_system
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.fuzz
# The gateway and what it reads; no session-worker or health-worker, so no fuzzed command is ever
# spawned and no fuzzed URL is ever fetched.
ROLES = ["gateway", "projector", "indexer", "classifier-worker"]
PRINCIPALS = ("owner", "user")


@pytest.fixture
async def target(nats_url: str, database_url: str) -> AsyncIterator[tuple[System, FuzzTarget, dict[str, str]]]:
    """A running toolmesh with a few servers registered, where to fuzz it, and a token per principal."""
    async with running_system(nats_url, database_url, roles=ROLES) as system, launch_peer("stdio") as stdio:
        configs = {
            "local": ("STDIO", stdio.config),
            "remote": ("SSE", {"url": "https://mcp.example.com/sse", "headers": {"Authorization": "Bearer x"}}),
            "loopback": ("HTTP", {"base_url": "http://127.0.0.1:9/mcp"}),
        }
        ids = []
        for name, (transport, config) in configs.items():
            ids.append((await system.register(name, transport, config, auto_connect=False))["id"])
        user = await system.api.post("/api/v1/auth/keys", json={"name": "fuzz-user", "role": "user"})
        tokens = {"owner": ADMIN_TOKEN, "user": user.json()["token"]}
        yield system, FuzzTarget(f"http://{system.settings.host}:{system.settings.port}", tuple(ids)), tokens


@pytest.mark.parametrize("principal", PRINCIPALS)
async def test_no_5xx_for_generated_requests(target: tuple[System, FuzzTarget, dict[str, str]], principal: str) -> None:
    _, fuzz_target, tokens = target
    outcome = await fuzz(fuzz_target, principal, tokens[principal], FuzzBudget.from_env(os.environ))
    assert outcome.returncode == 0, outcome.output[-8000:]
