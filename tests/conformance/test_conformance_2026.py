"""The 2026 conformance suite (0.2.0-alpha.11, ``--suite all``: both protocol eras) through two gateway
replicas behind a load balancer without stickiness: replica A in this process, replica B a
``toolmesh gateway`` of its own, every HTTP request to the next one in turn. The suite's reference
server (``shared/conformance-2026``) is registered over Streamable HTTP and tested at
``/mcp/everything``.

Every scenario in ``PASSING`` must pass: the handshake era's sampling and elicitation (the client's
answer reaches the replica whose call waits), the stateless era's header checks, and every
``input-required-result-*`` scenario: the reference server speaks 2026-07-28 too, so its clients of
that era are relayed in it, its ``InputRequiredResult`` reaching them with the ``requestState``
sealed, and their retries complete on whichever replica they reach. Not there yet (issue 27): the
Tasks extension (nine ``tasks-*`` scenarios), and ``http-custom-header-server-validation``, which
needs a tool with ``x-mcp-header`` that the reference server has none of. The test prints how many
pass and which do not, so both are in the CI log.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator

import pytest

from tests.conformance.auth_proxy import auth_proxy
from tests.conformance.kit import Kit, prepare
from tests.conformance.test_conformance import scenario_results
from tests.harness import ADMIN_TOKEN, RoleProcess, eventually, running_system
from tests.peers.launch import free_port, running_process
from toolmesh.platform import processes

pytestmark = pytest.mark.conformance
SUITE_SECONDS = 600
PASSING = frozenset(
    {
        "server-initialize",
        "server-session-lifecycle",
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
        "json-schema-2020-12",
        "elicitation-sep1034-defaults",
        "server-sse-polling",
        "server-sse-multiple-streams",
        "elicitation-sep1330-enums",
        "resources-list",
        "resources-read-text",
        "resources-read-binary",
        "resources-templates-read",
        "resources-subscribe",
        "resources-unsubscribe",
        "sep-2164-resource-not-found",
        "prompts-list",
        "prompts-get-simple",
        "prompts-get-with-args",
        "prompts-get-embedded-resource",
        "prompts-get-with-image",
        "dns-rebinding-protection",
        "caching",
        "http-header-validation",
        "input-required-result-basic-elicitation",
        "input-required-result-basic-list-roots",
        "input-required-result-basic-sampling",
        "input-required-result-capability-check",
        "input-required-result-ignore-extra-params",
        "input-required-result-missing-input-response",
        "input-required-result-multi-round",
        "input-required-result-multiple-input-requests",
        "input-required-result-non-tool-request",
        "input-required-result-request-state",
        "input-required-result-result-type",
        "input-required-result-tampered-state",
        "input-required-result-unsupported-methods",
        "input-required-result-validate-input",
        "server-stateless",
        "tasks-status-notifications",
    }
)


@pytest.fixture(scope="module")
def kit() -> Kit:
    return prepare()


@pytest.fixture
async def round_robin(kit: Kit, nats_url: str, database_url: str) -> AsyncIterator[int]:
    """Two replicas with the reference server registered as ``everything``; the balancer's port."""
    port = free_port()
    env = {"PORT": str(port), "NODE_OPTIONS": f"--require {kit.loopback}"}
    async with (
        running_process(kit.server_argv(kit.server_2026), port=port, env=env),
        running_system(nats_url, database_url) as system,
    ):
        created = await system.register("everything", "HTTP", {"base_url": f"http://127.0.0.1:{port}/mcp"})
        await system.wait_connected(created["id"])
        port_b = free_port()
        b = RoleProcess("gateway", system.settings, env={"TOOLMESH_PORT": str(port_b)})
        try:
            await eventually(lambda: _answers(port_b), timeout=60, what="replica B to answer")
            async with auth_proxy([system.settings.port, port_b], ADMIN_TOKEN) as balancer:
                yield balancer
        finally:
            b.terminate()


async def _answers(port: int) -> bool:
    """Whether something accepts connections on ``port``."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True


async def test_the_2026_suite_through_two_replicas_round_robin(kit: Kit, round_robin: int) -> None:
    url = f"http://127.0.0.1:{round_robin}/mcp/everything"
    process = await processes.spawn_piped(
        kit.suite_2026_argv(url), env={**os.environ, "NO_COLOR": "1"}, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), SUITE_SECONDS)
    finally:
        await processes.stop(process, signal.SIGKILL, 0)
    text = output.decode(errors="replace")
    results = scenario_results(text)
    passed = sorted(name for name, ok in results.items() if ok)
    failing = sorted(name for name, ok in results.items() if not ok)
    sys.stdout.write(f"\n2026 suite through two replicas: {len(passed)} of {len(results)} scenarios pass\n")
    sys.stdout.write(f"not passing: {', '.join(failing)}\n")
    assert len(results) == 62, text[-3000:]
    assert sorted(PASSING - set(passed)) == [], text[-8000:]
