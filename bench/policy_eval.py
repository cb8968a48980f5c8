"""What policies on tool calls cost: 100 CEL rules checked on every call.

    python bench/policy_eval.py [--calls N] [--rest-calls N]

Part one, in this process, through the gateway's real check (``CallPolicies.check``: the attributes of
the call, one CEL ``Context``, every rule of the namespace evaluated and combined): p50 and p95 in ms
per call with 100 rules that match nothing (the usual case: every rule is evaluated), and with 0.

Part two, a real deployment (``toolmesh up`` on fresh NATS and Postgres, one loopback upstream from
``load_upstreams.py``): the same ``POST /api/v1/tools/call`` made ``--rest-calls`` times with 0 and
then with 100 policies, and the CPU seconds of the toolmesh process per call (psutil) in each case.

Prints ONE JSON line. The target (issue 30) is at most 0.2 ms p50 added per call; not asserted here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from load_system import Pool, deployment, poll, register_http, state, upstreams

from toolmesh.contracts.keys import Role
from toolmesh.contracts.policies import PolicyRequest, PolicySaved
from toolmesh.lifecycle import ServerStatus
from toolmesh_gateway.auth import Caller, Principal
from toolmesh_gateway.catalog import Catalog
from toolmesh_gateway.policies.book import PolicyBook
from toolmesh_gateway.policies.checks import CallPolicies, CallSubject
from toolmesh_gateway.routing import ServerRoute

RULES = 100


def rules(count: int) -> list[dict[str, Any]]:
    """``count`` policies of the kinds people write, none of which matches the benchmark's call."""
    kinds = [
        ('server.name == "github{i}" && tool.name.startsWith("delete_") && principal.role == "user"', "deny"),
        ('has(args.path) && args.path.startsWith("/etc/{i}")', "deny"),
        ('tool.annotations.destructiveHint == true && endpoint == "ops{i}"', "require_approval"),
        ('principal.name == "intern{i}" && surface in ["rest", "nats"]', "deny"),
        ('tool.name == "get_secret_{i}"', "redact"),
    ]
    made = []
    for i in range(count):
        expression, effect = kinds[i % len(kinds)]
        made.append(
            {
                "name": f"rule-{i:03d}",
                "expression": expression.replace("{i}", str(i)),
                "effect": effect,
                "reason": f"rule {i}",
                "redact": ["token"] if effect == "redact" else [],
                "namespace": "default",
            }
        )
    return made


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 4),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 4),
    }


async def in_process(calls: int) -> dict[str, Any]:
    """p50/p95 of ``CallPolicies.check`` with 0 and with ``RULES`` rules."""
    caller = Caller(Principal("key-1", "dev", Role.USER, "default"), "127.0.0.1")
    call = CallSubject(
        caller,
        ServerRoute("server-1", "load000", ServerStatus.CONNECTED, "default"),
        "tool_0000",
        {"text": "hello", "path": "/tmp/notes"},
        "rest",
    )

    async def timed(book: PolicyBook) -> dict[str, float]:
        check = CallPolicies(book, Catalog(), gate=None).check  # type: ignore[arg-type]  # never asked
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            await check(call)
            samples.append(time.perf_counter() - started)
        return percentiles(samples)

    empty, full = PolicyBook(), PolicyBook()
    for i, body in enumerate(rules(RULES)):
        full.apply(PolicySaved(policy_id=f"p{i}", policy=PolicyRequest.model_validate(body)))
    without, with_rules = await timed(empty), await timed(full)
    return {
        "rules": len(full.rules_for("default")),
        "calls": calls,
        "without_rules": without,
        "with_rules": with_rules,
        "added_p50_ms": round(with_rules["p50_ms"] - without["p50_ms"], 4),
    }


async def through_rest(calls: int) -> dict[str, Any]:
    """Gateway CPU per REST call with 0 and with ``RULES`` policies."""
    with tempfile.TemporaryDirectory(prefix="toolmesh-policy-bench-") as tmp, upstreams(1, 1) as (ports, _):
        async with deployment(Path(tmp), ["up"], {}) as deploy:
            api = Pool(deploy.port)
            await register_http(api, "load000", ports[0])

            async def connected() -> bool:
                return int((await state(api)).get("total_tools", 0)) >= 1

            await poll(connected, 60, "the upstream's tools")
            body = json.dumps({"name": "load000.tool_0000", "arguments": {"text": "hello"}}).encode()

            async def cpu_per_call() -> float:
                for _ in range(50):  # warm-up
                    await api.request("POST", "/api/v1/tools/call", body)
                before = deploy.cpu_seconds()["up"]
                for _ in range(calls):
                    status, answer = await api.request("POST", "/api/v1/tools/call", body)
                    if status != 200:
                        raise RuntimeError(f"call failed: {status} {answer[:200]!r}")
                return (deploy.cpu_seconds()["up"] - before) / calls * 1000

            without = await cpu_per_call()
            for rule in rules(RULES):
                status, answer = await api.request("POST", "/api/v1/policies", json.dumps(rule).encode())
                if status != 201:
                    raise RuntimeError(f"policy refused: {status} {answer[:200]!r}")
            with_rules = await cpu_per_call()
            api.close()
    return {
        "calls": calls,
        "cpu_ms_per_call_without_rules": round(without, 4),
        "cpu_ms_per_call_with_rules": round(with_rules, 4),
        "added_cpu_ms_per_call": round(with_rules - without, 4),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rest-calls", type=int, default=2000)
    args = parser.parse_args()
    result = {"benchmark": "policy_eval", "in_process": await in_process(args.calls)}
    if args.rest_calls:
        result["rest"] = await through_rest(args.rest_calls)
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
