"""Calls offered far above what the machine sustains, every role in its own process: whatever is not
answered is refused as overload (429 or 503, with Retry-After) and nothing else, no server changes lease
owner meanwhile, and no call is executed twice (each STDIO server notes every execution in a ledger).
Latency is the benchmark's business (``bench/overload.py``), not this test's."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.lease_owners import OwnerWatch
from bench.load_system import Pool
from bench.pacing import paced
from tests.faults.cluster import running_cluster
from tests.faults.ledger_servers import CALL, LedgerServers
from tests.harness import ADMIN_TOKEN
from toolmesh.platform.bus.topology import leases_bucket
from toolmesh.platform.config import Settings
from toolmesh_cli.embedded import EmbeddedNats

SERVERS = 4
RATE = 1500.0  # calls/s offered: well above what two cores sustain with every role in its own process
SECONDS = 20.0
IN_FLIGHT = 3072  # open connections, 1,536 per gateway: within a listener's default accept backlog (2,048)
CALL_TIMEOUT_SECONDS = 5
LEASE = {"lease_ttl_seconds": 5.0, "lease_renew_seconds": 1.0}
SHEDDING = {"shed_loop_lag_ms": Settings.model_fields["shed_loop_lag_ms"].default}
"""Every role in its own process sheds on its own loop's lag as a deployment does (the harness turns it off)."""
REFUSALS = (429, 503)


@dataclass
class Answer:
    key: str
    status: int  # 0: no HTTP answer
    retry_after: bool
    detail: str


async def _call(api: Pool, key: str, server: str) -> Answer:
    """One call with the benchmarks' cheap HTTP/1.1 client (an httpx client would saturate first)."""
    body = {"name": f"{server}.tally", "arguments": {"key": key}, "timeout_seconds": CALL_TIMEOUT_SECONDS}
    try:
        status, headers, answer = await api.exchange("POST", CALL, json.dumps(body).encode())
    except (OSError, asyncio.IncompleteReadError) as exc:
        return Answer(key, 0, False, type(exc).__name__)
    retry_after = "retry-after" in headers
    if status == 200 and json.loads(answer).get("isError"):
        return Answer(key, 200, retry_after, f"tool error {answer[:120]!r}")
    return Answer(key, status, retry_after, "" if status == 200 else answer[:120].decode(errors="replace"))


async def _offer(apis: list[Pool], servers: list[str]) -> tuple[list[Answer], float]:
    """Open-loop calls at ``RATE`` for ``SECONDS`` (at most ``IN_FLIGHT`` at once); answers, rate offered."""
    answers: list[Answer] = []

    async def one(n: int, _: float) -> None:
        answers.append(await _call(apis[n % len(apis)], f"o-{n}", servers[n % len(servers)]))

    offered = await paced(one, RATE, int(RATE * SECONDS), IN_FLIGHT)
    return answers, offered


async def test_overload_is_refused_with_retry_after_and_moves_no_server(
    fault_nats: EmbeddedNats, fault_database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "ledger").mkdir()
    servers = LedgerServers(tmp_path / "ledger")
    overrides = {**LEASE, **SHEDDING}
    logs = tmp_path / "logs"
    async with running_cluster(fault_nats.url, fault_database_url, logs, **overrides) as (cluster, systems):
        for index in range(SERVERS):
            await systems[0].wait_connected(await servers.register(systems[0], f"o{index}"), timeout=60)
        apis = [Pool(gateway.port or 0, ADMIN_TOKEN) for gateway in cluster.of("gateway")]
        try:
            leases = await leases_bucket(systems[0].backends.js, systems[0].settings.lease_ttl_seconds)
            async with OwnerWatch().watching(leases) as owners:
                answers, offered = await _offer(apis, list(servers.ids))
        finally:
            for api in apis:
                api.close()
        running = all(role.running() for role in cluster.roles)

    statuses = Counter(a.status for a in answers)
    print(f"offered {offered:.0f}/s for {SECONDS:g} s: {dict(statuses)}")
    wrong = [a for a in answers if a.status not in REFUSALS and (a.status != 200 or a.detail)]
    unmarked = [a for a in answers if a.status in REFUSALS and not a.retry_after]
    executions = servers.executions()
    twice = {key: n for key, n in executions.items() if n > 1}
    lost = [a.key for a in answers if a.status == 200 and not a.detail and executions.get(a.key) != 1]
    problems = [
        *(
            [f"{len(wrong)} calls failed otherwise than 429/503: {Counter(a.detail[:60] for a in wrong)}"]
            if wrong
            else []
        ),
        *([f"{len(unmarked)} refusals without Retry-After: {unmarked[:3]}"] if unmarked else []),
        *([f"lease owner changes during the run: {owners.changes[:6]}"] if owners.changes else []),
        *([f"{len(twice)} call ids executed more than once: {list(twice)[:5]}"] if twice else []),
        *([f"{len(lost)} calls answered 200 but not executed exactly once: {lost[:5]}"] if lost else []),
        *([] if statuses[200] else ["no call succeeded"]),
        *([] if running else ["a role process exited"]),
    ]
    print("\n".join(problems))
    assert not problems, "\n".join(problems)
