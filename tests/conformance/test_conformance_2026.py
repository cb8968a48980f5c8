"""The 2026 conformance suite (0.2.0-alpha.11: both protocol eras) through two gateway replicas
behind a load balancer without stickiness: replica A in this process, replica B a ``toolmesh
gateway`` of its own, every HTTP request to the next one in turn.

In front of the suite's reference server (``shared/conformance-2026``, registered over Streamable
HTTP as ``everything``), ``--suite all`` at ``/mcp/everything`` and at the aggregate ``/mcp``, and
``--requirements`` of each revision: every scenario passes but those in ``NOT_YET`` (the reference
server has neither the Tasks scenarios' fixtures nor a tool with ``x-mcp-header``) and, at ``/mcp``,
those that look for an original tool name. That covers the handshake era's sampling and elicitation
(the client's answer reaches the replica whose call waits) and every ``input-required-result-*``
scenario (the reference server speaks 2026-07-28 too: its ``InputRequiredResult`` reaches the client
with the ``requestState`` sealed, and the retry completes on whichever replica it reaches). The Tasks
scenarios run one by one in front of ``tests/peers/task_tools.py``, a server with their fixtures
(``tasks-mrtr-composition`` in front of ``tests/peers/upstream_tasks.py``, which runs tasks itself).
Each test prints how many scenarios pass and which do not, so both are in the CI log.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.auth_proxy import auth_proxy
from tests.conformance.kit import Kit, prepare
from tests.conformance.reference_2026 import reference_system
from tests.conformance.test_conformance import scenario_results
from tests.harness import ADMIN_TOKEN, System, second_gateway
from tests.tasks_client import task_tools_system, upstream_tasks_registered
from toolmesh.platform import processes

pytestmark = pytest.mark.conformance
SUITE_SECONDS = 600
TASK_TOOLS = Path(__file__).parents[1] / "peers" / "task_tools.py"
HEADER_SCENARIO = "http-custom-header-server-validation"
FIXTURE_SCENARIOS = (
    HEADER_SCENARIO,
    "tasks-capability-negotiation",
    "tasks-dispatch-and-envelope",
    "tasks-lifecycle",
    "tasks-mrtr-composition",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-request-state-removal",
    "tasks-required-task-error",
    "tasks-status-notifications",
    "tasks-wire-fields",
)
"""What needs fixtures the reference server does not have: the Tasks scenarios' tools and a tool with
``x-mcp-header``; they run against ``tests/peers/task_tools.py`` instead, but those in
``UPSTREAM_TASK_SCENARIOS``."""
UPSTREAM_TASK_SCENARIOS = frozenset({"tasks-mrtr-composition"})
"""What wants a tool that answers ``InputRequiredResult`` before it makes a task, which only a server that
runs tasks itself does: run against ``tests/peers/upstream_tasks.py``, whose tasks toolmesh passes through."""
NOT_YET = frozenset(FIXTURE_SCENARIOS) - {"tasks-status-notifications"}
"""What does not pass in front of the reference server, for want of those fixtures."""
NAMED_ON_THE_AGGREGATE = frozenset({"json-schema-2020-12"})
"""What looks for an original tool name in ``tools/list``, which the aggregate lists as ``server__tool``."""
FIXTURE_PASSING = frozenset(
    {
        HEADER_SCENARIO,
        f"{HEADER_SCENARIO} at /mcp",
        "tasks-capability-negotiation",
        "tasks-dispatch-and-envelope",
        "tasks-lifecycle",
        "tasks-mrtr-composition",
        "tasks-mrtr-input",
        "tasks-request-headers",
        "tasks-request-state-removal",
        "tasks-required-task-error",
        "tasks-status-notifications",
        "tasks-wire-fields",
    }
)


@pytest.fixture(scope="module")
def kit() -> Kit:
    return prepare()


@pytest.fixture
async def round_robin(kit: Kit, nats_url: str, database_url: str) -> AsyncIterator[int]:
    """Two replicas with the reference server registered as ``everything``; the balancer's port."""
    async with reference_system(kit, nats_url, database_url) as system, balanced(system) as balancer:
        yield balancer


@pytest.fixture
async def tasks_round_robin(nats_url: str, database_url: str) -> AsyncIterator[int]:
    """Two replicas with ``tests/peers/task_tools.py`` registered as ``tasks`` and
    ``tests/peers/upstream_tasks.py`` as ``upstream-tasks``; the balancer's port."""
    async with (
        task_tools_system(nats_url, database_url) as system,
        upstream_tasks_registered(system),
        balanced(system) as balancer,
    ):
        yield balancer


@asynccontextmanager
async def balanced(system: System) -> AsyncIterator[int]:
    """Replica B beside ``system``'s replica A, and a balancer sending every HTTP request to the next
    of the two; the balancer's port."""
    async with (
        second_gateway(system) as (_, port_b),
        auth_proxy([system.settings.port, port_b], ADMIN_TOKEN) as balancer,
    ):
        yield balancer


async def test_the_2026_suite_through_two_replicas_round_robin(kit: Kit, round_robin: int) -> None:
    results = await _suite(kit, f"http://127.0.0.1:{round_robin}/mcp/everything", "2026 suite at /mcp/{name}")
    assert len(results) == 62, results
    assert sorted(name for name, ok in results.items() if not ok and name not in NOT_YET) == []


async def test_the_2026_suite_on_the_aggregate_through_two_replicas(kit: Kit, round_robin: int) -> None:
    """The aggregate ``/mcp``: every scenario that does not look for an original name passes."""
    results = await _suite(kit, f"http://127.0.0.1:{round_robin}/mcp", "2026 suite at /mcp")
    assert len(results) == 62, results
    allowed = NOT_YET | NAMED_ON_THE_AGGREGATE
    assert sorted(name for name, ok in results.items() if not ok and name not in allowed) == []


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
async def test_what_each_revision_requires_through_two_replicas(kit: Kit, round_robin: int, revision: str) -> None:
    """``--requirements``: exactly the scenarios a revision requires, frozen at its release."""
    url = f"http://127.0.0.1:{round_robin}/mcp/everything"
    results = await _suite(kit, url, f"{revision} requirements at /mcp/{{name}}", "--requirements", revision)
    assert results, "no scenario ran"
    assert sorted(name for name, ok in results.items() if not ok and name not in NOT_YET) == []


async def test_the_fixture_scenarios_through_two_replicas_round_robin(kit: Kit, tasks_round_robin: int) -> None:
    """The Tasks extension run by toolmesh, and ``Mcp-Param-*`` headers checked by it, in front of a
    server whose tools say which may run as tasks and which mirror a parameter in a header (the
    reference server has none of those fixtures), at ``/mcp/tasks`` and, for the header check, at the
    aggregate ``/mcp`` too; the tasks of a server that runs them itself passed through, at
    ``/mcp/upstream-tasks``. Each scenario runs on its own, its checks read from the suite's JSON: every
    check of a scenario in ``FIXTURE_PASSING`` passes, but for the suite's schema gap (``_schema_gap``)."""
    base = f"http://127.0.0.1:{tasks_round_robin}"
    endpoint = {
        scenario: "upstream-tasks" if scenario in UPSTREAM_TASK_SCENARIOS else "tasks" for scenario in FIXTURE_SCENARIOS
    }
    runs = [(f"{base}/mcp/{endpoint[scenario]}", scenario, scenario) for scenario in FIXTURE_SCENARIOS]
    runs.append((f"{base}/mcp", HEADER_SCENARIO, f"{HEADER_SCENARIO} at /mcp"))
    failing: dict[str, list[str]] = {}
    for url, scenario, named in runs:
        checks = await _checks(kit, url, scenario)
        failing[named] = [str(c.get("name")) for c in checks if c.get("status") == "FAILURE" and not _schema_gap(c)]
        if not checks:
            failing[named] = ["no checks ran"]
    passed = sorted(name for name, failed in failing.items() if not failed)
    sys.stdout.write(f"\nFixture scenarios through two replicas: {len(passed)} of {len(failing)} pass\n")
    described = [f"{name} ({', '.join(failed)})" for name, failed in failing.items() if failed]
    sys.stdout.write(f"not passing: {'; '.join(described)}\n")
    assert sorted(FIXTURE_PASSING - set(passed)) == [], failing


def _schema_gap(check: dict[str, Any]) -> bool:
    """Whether a failed check is only the suite's schema gap: its wire validator checks a
    ``tools/call`` result against ``CallToolResult`` unless it is an ``InputRequiredResult``, so every
    ``CreateTaskResult`` (``resultType: "task"``, the extension's own shape, which has no ``content``)
    is reported as missing ``content``, whoever sends it."""
    violations = (check.get("details") or {}).get("violations") or []
    return (
        check.get("id") == "wire-schema-valid"
        and bool(violations)
        and all(
            v.get("context") == "response to 'tools/call'"
            and (v.get("message") or {}).get("result", {}).get("resultType") == "task"
            and v.get("errors") == ["CallToolResult: must have required property 'content' (result of 'tools/call')"]
            for v in violations
        )
    )


async def _checks(kit: Kit, url: str, scenario: str) -> list[dict[str, Any]]:
    """The checks of one scenario against ``url`` (the suite's ``--verbose`` JSON)."""
    argv = kit.suite_2026_argv(url, "--scenario", scenario, "--verbose")
    process = await processes.spawn_piped(argv, env={**os.environ, "NO_COLOR": "1"}, stderr=asyncio.subprocess.STDOUT)
    try:
        output, _ = await asyncio.wait_for(process.communicate(), SUITE_SECONDS)
    finally:
        await processes.stop(process, signal.SIGKILL, 0)
    text = output.decode(errors="replace")
    start = text.find("\n[")
    if start < 0:
        sys.stdout.write(text[-4000:])
        return []
    checks, _ = json.JSONDecoder().raw_decode(text, start + 1)
    return list(checks)


async def _suite(kit: Kit, url: str, what: str, *options: str) -> dict[str, bool]:
    """Run the suite (``--suite all`` unless ``options`` say otherwise) against ``url``; print how many
    scenarios pass and which do not."""
    process = await processes.spawn_piped(
        kit.suite_2026_argv(url, *options), env={**os.environ, "NO_COLOR": "1"}, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), SUITE_SECONDS)
    finally:
        await processes.stop(process, signal.SIGKILL, 0)
    text = output.decode(errors="replace")
    results = scenario_results(text)
    failing = sorted(name for name, ok in results.items() if not ok)
    sys.stdout.write(f"\n{what}: {len(results) - len(failing)} of {len(results)} scenarios pass\n")
    sys.stdout.write(f"not passing: {', '.join(failing)}\n")
    if not results:
        sys.stdout.write(text[-8000:])
    return results
