"""The official MCP conformance suite's server scenarios through toolmesh.

The reference everything-server (``shared/conformance``) is registered over Streamable HTTP; the
suite runs against ``/mcp/everything`` (every scenario must pass, as directly) and against the
aggregate ``/mcp`` (every scenario whose checks do not depend on original names: all of them,
since original names still route when unique). A loopback proxy adds the bearer token the suite
does not send. DNS-rebinding protection is the gateway's Origin/Host middleware
(``toolmesh_gateway.origin``): its scenario is required once that module exists.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import signal
from collections.abc import AsyncIterator

import pytest

from tests.conformance.auth_proxy import auth_proxy
from tests.conformance.kit import Kit, prepare
from tests.harness import ADMIN_TOKEN, System, running_system
from tests.peers.launch import free_port, running_process
from toolmesh.platform import processes

pytestmark = pytest.mark.conformance
SUITE_SECONDS = 240
SCENARIOS = frozenset(
    {
        "server-initialize",
        "logging-set-level",
        "ping",
        "completion-complete",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-with-logging",
        "tools-call-error",
        "tools-call-with-progress",
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "server-sse-multiple-streams",
        "elicitation-sep1330-enums",
        "resources-list",
        "resources-read-text",
        "resources-read-binary",
        "resources-templates-read",
        "resources-subscribe",
        "resources-unsubscribe",
        "prompts-list",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-embedded-resource",
        "prompts-get-with-image",
        "dns-rebinding-protection",
    }
)
ORIGIN_CHECKS = importlib.util.find_spec("toolmesh_gateway.origin") is not None
_SUMMARY = re.compile(r"^([✓✗]) (\S+): (\d+) passed, (\d+) failed$", re.MULTILINE)


def scenario_results(output: str) -> dict[str, bool]:
    """``{scenario: passed}`` from the suite's summary lines."""
    return {m.group(2): m.group(1) == "✓" and m.group(4) == "0" for m in _SUMMARY.finditer(output)}


@pytest.fixture(scope="module")
def kit() -> Kit:
    return prepare()


@pytest.fixture
async def gateway(kit: Kit, nats_url: str, database_url: str) -> AsyncIterator[tuple[System, int]]:
    """toolmesh with the everything-server registered as ``everything``; yields it and the auth proxy's port."""
    port = free_port()
    env = {"PORT": str(port), "NODE_OPTIONS": f"--require {kit.loopback}"}
    async with (
        running_process(kit.server_argv(), port=port, env=env),
        running_system(nats_url, database_url) as system,
    ):
        config = {"base_url": f"http://127.0.0.1:{port}/mcp", "headers": {}}
        created = await system.register("everything", "HTTP", config)
        await system.wait_connected(created["id"])
        async with auth_proxy(system.settings.port, ADMIN_TOKEN) as proxy:
            yield system, proxy


async def run_suite(kit: Kit, url: str) -> tuple[dict[str, bool], str]:
    process = await processes.spawn_piped(
        kit.suite_argv(url), env={**os.environ, "NO_COLOR": "1"}, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), SUITE_SECONDS)
    finally:
        await processes.stop(process, signal.SIGKILL, 0)
    text = output.decode(errors="replace")
    return scenario_results(text), text


def failed(results: dict[str, bool], required: frozenset[str]) -> list[str]:
    """Required scenarios that failed or did not run, by name."""
    return sorted(name for name in required if not results.get(name, False))


async def test_every_scenario_passes_at_the_servers_own_path(kit: Kit, gateway: tuple[System, int]) -> None:
    _, proxy = gateway
    results, output = await run_suite(kit, f"http://127.0.0.1:{proxy}/mcp/everything")
    assert set(results) == SCENARIOS, output[-3000:]
    required = SCENARIOS if ORIGIN_CHECKS else SCENARIOS - {"dns-rebinding-protection"}
    assert failed(results, required) == [], output[-6000:]


async def test_every_scenario_passes_through_the_aggregate(kit: Kit, gateway: tuple[System, int]) -> None:
    _, proxy = gateway
    results, output = await run_suite(kit, f"http://127.0.0.1:{proxy}/mcp")
    assert set(results) == SCENARIOS, output[-3000:]
    required = SCENARIOS if ORIGIN_CHECKS else SCENARIOS - {"dns-rebinding-protection"}
    assert failed(results, required) == [], output[-6000:]
