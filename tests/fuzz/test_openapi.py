"""Schema-driven fuzzing of the REST API (schemathesis against ``/openapi.json``) as every role — owner,
admin, agent, user and a key limited to an endpoint — and a depth and size fuzz of JSON bodies
(``bodies.py``): no 5xx.

Bounded by ``tests.fuzz.runner.FuzzBudget`` (about a minute per principal, a third of it for the
endpoint-limited key, which every REST operation refuses; ``TOOLMESH_FUZZ_*`` widen it) and by the
body fuzz's fixed shapes. Every 5xx it ever found has a regression test in
tests/integration/test_fuzz_regressions.py or tests/integration/test_bad_input.py.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator

import pytest

from tests.fuzz.bodies import fuzz_bodies
from tests.fuzz.runner import FuzzBudget, FuzzTarget, fuzz
from tests.harness import ADMIN_TOKEN, System, running_system
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.fuzz
# The gateway and what it reads; no session-worker or health-worker, so no fuzzed command is ever
# spawned and no fuzzed URL is ever fetched.
ROLES = ["gateway", "projector", "indexer", "classifier-worker"]
PRINCIPALS = ("owner", "admin", "agent", "user", "endpoint-key")
BODY_LIMIT = 512 * 1024
"""The fuzzed system's body limit: small, so bodies at and past it stay cheap to send."""
JSON_DEPTH = 64


@pytest.fixture
async def target(nats_url: str, database_url: str) -> AsyncIterator[tuple[System, FuzzTarget, dict[str, str]]]:
    """A running toolmesh with a few servers registered, where to fuzz it, and a token per principal."""
    async with (
        running_system(
            nats_url, database_url, roles=ROLES, max_request_body_bytes=BODY_LIMIT, max_request_json_depth=JSON_DEPTH
        ) as system,
        launch_peer("stdio") as stdio,
    ):
        configs = {
            "local": ("STDIO", stdio.config),
            "remote": ("SSE", {"url": "https://mcp.example.com/sse", "headers": {"Authorization": "Bearer x"}}),
            "loopback": ("HTTP", {"base_url": "http://127.0.0.1:9/mcp"}),
        }
        ids = []
        for name, (transport, config) in configs.items():
            ids.append((await system.register(name, transport, config, auto_connect=False))["id"])
        endpoint = await system.api.post("/api/v1/endpoints", json={"name": "fuzz", "include": ["local.*"]})
        assert endpoint.status_code == 201, endpoint.text
        tokens = {"owner": ADMIN_TOKEN}
        for principal, fields in (
            ("admin", {"role": "admin"}),
            ("agent", {"role": "agent"}),
            ("user", {"role": "user"}),
            ("endpoint-key", {"role": "user", "endpoints": ["fuzz"]}),
        ):
            created = await system.api.post("/api/v1/auth/keys", json={"name": f"fuzz-{principal}", **fields})
            assert created.status_code == 201, created.text
            tokens[principal] = created.json()["token"]
        yield system, FuzzTarget(f"http://{system.settings.host}:{system.settings.port}", tuple(ids)), tokens


@pytest.mark.parametrize("principal", PRINCIPALS)
async def test_no_5xx_for_generated_requests(target: tuple[System, FuzzTarget, dict[str, str]], principal: str) -> None:
    _, fuzz_target, tokens = target
    budget = FuzzBudget.from_env(os.environ)
    if principal == "endpoint-key":  # refused by every REST operation: a shorter run finds as much
        budget = dataclasses.replace(budget, max_seconds=max(budget.max_seconds // 3, 1))
    outcome = await fuzz(fuzz_target, principal, tokens[principal], budget)
    assert outcome.returncode == 0, outcome.output[-8000:]


async def test_no_5xx_for_deep_and_huge_json_bodies(target: tuple[System, FuzzTarget, dict[str, str]]) -> None:
    """As the owner, whom no operation refuses before reading its body."""
    _, fuzz_target, tokens = target
    findings, sent = await fuzz_bodies(
        fuzz_target.base_url,
        tokens["owner"],
        max_bytes=BODY_LIMIT,
        max_depth=JSON_DEPTH,
        server_ids=fuzz_target.server_ids,
    )
    assert sent > 0 and findings == [], "\n".join(map(str, findings))
