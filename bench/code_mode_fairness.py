"""How long one tenant's ``1 + 1`` in code mode waits while another tenant saturates the pool.

    python bench/code_mode_fairness.py [--loops N] [--loop-seconds S] [--rounds R]

Runs the gateway's ``CodeRunner`` (pydantic-monty worker pool, ``TOOLMESH_CODE_MAX_WORKERS``
workers) in this process: tenant A starts ``N`` runs of ``while True: pass`` with an ``S``-second
budget; once they had a second to take the workers, tenant B runs ``1 + 1``. Each round measures
B's run from start to result (and checks that A's loops were still running when B's result came).
Prints ONE JSON line: B's wait per round (median and max), and whether B finished before A's loops.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from toolmesh.contracts.tools import ToolCallRequest
from toolmesh.platform.config import Settings
from toolmesh_gateway.catalog import Catalog
from toolmesh_gateway.front_door.code_mode import CallerPacks, CodeRunner

SETTLE_SECONDS = 1.0
"""How long A's loops get to take the pool's workers before B asks for one."""


async def _no_tool(request: ToolCallRequest) -> dict[str, Any]:
    raise RuntimeError("no tools in this benchmark")


async def _no_search(query: str, limit: int, servers: list[str] | None) -> list[dict[str, Any]]:
    return []


async def one_round(runner: CodeRunner, catalog: Catalog, loops: int, loop_seconds: float) -> tuple[float, bool]:
    """(B's wait in seconds, whether every A loop was still running when B's result came)."""
    tenant_a = CallerPacks(catalog.view("tenant-a"), _no_tool, _no_search)
    tenant_b = CallerPacks(catalog.view("tenant-b"), _no_tool, _no_search)
    spinning = [asyncio.create_task(runner.run("while True:\n    pass", tenant_a, loop_seconds)) for _ in range(loops)]
    await asyncio.sleep(SETTLE_SECONDS)
    started = time.perf_counter()
    result = await runner.run("1 + 1", tenant_b, loop_seconds * (loops + 1))
    waited = time.perf_counter() - started
    before_a = not any(task.done() for task in spinning)
    await asyncio.gather(*spinning)
    if not (result.ok and result.value == 2):
        raise SystemExit(f"tenant B's run failed: {result.error}")
    return waited, before_a


async def bench(loops: int, loop_seconds: float, rounds: int) -> dict[str, Any]:
    settings = Settings()
    runner = CodeRunner(settings)
    catalog = Catalog()
    try:
        await runner.run("0", CallerPacks(catalog.view("warm-up"), _no_tool, _no_search))  # start the pool
        measured = [await one_round(runner, catalog, loops, loop_seconds) for _ in range(rounds)]
    finally:
        await runner.close()
    waits = [wait for wait, _ in measured]
    return {
        "bench": "code_mode_fairness",
        "workers": settings.code_max_workers,
        "tenant_a_loops": loops,
        "loop_seconds": loop_seconds,
        "rounds": rounds,
        "b_wait_median_s": round(statistics.median(waits), 3),
        "b_wait_max_s": round(max(waits), 3),
        "b_done_before_a_loops": all(before for _, before in measured),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--loops", type=int, default=3)
    parser.add_argument("--loop-seconds", type=float, default=6.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(bench(args.loops, args.loop_seconds, args.rounds))), flush=True)


if __name__ == "__main__":
    main()
