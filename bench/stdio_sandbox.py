"""Start-up cost of the STDIO sandbox: connect (spawn + MCP handshake) to the demo server with and
without bubblewrap, through the session-worker's own ``open_session`` and ``Sandboxer``; and, less
noisy on a busy host, the wall and CPU time of starting ``/bin/true`` with and without it.

Runs alternate between the two so load drifts hit both alike; medians are reported. One JSON line::

    python bench/stdio_sandbox.py
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.harness import SANDBOX_PATHS  # noqa: E402
from tests.peers.launch import demo_args  # noqa: E402
from toolmesh.platform import processes  # noqa: E402
from toolmesh.platform.config import Settings  # noqa: E402
from toolmesh.sandbox.runner import Sandboxer, mode  # noqa: E402
from toolmesh_session_worker.upstream import OpeningOptions, open_session  # noqa: E402
from toolmesh_session_worker.upstream.stdio import base_environment  # noqa: E402

RUNS = int(os.environ.get("TOOLMESH_BENCH_RUNS", "11"))


async def connect_seconds(settings: Settings, sandboxed: bool) -> float:
    """Seconds from spawn to a finished ``initialize`` handshake (the session is closed after)."""
    config = {"command": sys.executable, "args": demo_args("stdio")}
    started = time.perf_counter()
    session = await open_session(
        "bench",
        "STDIO",
        config,
        OpeningOptions(
            connect_timeout=60,
            stdio_base_env=base_environment(settings.stdio_base_env, os.environ),
            stdio_sandbox=Sandboxer(settings, "bench") if sandboxed else None,
        ),
    )
    elapsed = time.perf_counter() - started
    await session.close()
    return elapsed


async def start_seconds(settings: Settings, sandboxed: bool) -> tuple[float, float]:
    """Wall and CPU seconds to start ``/bin/true`` as a STDIO child and reap it."""
    env = base_environment(settings.stdio_base_env, os.environ)
    launch = Sandboxer(settings, "bench").launch("/bin/true", [], env, None, None) if sandboxed else None
    argv, child_env, cwd = (launch.argv, launch.env, launch.cwd) if launch else (["/bin/true"], env, None)
    cpu_before = _children_cpu()
    started = time.perf_counter()
    process = await processes.spawn_piped(
        argv,
        env=child_env,
        cwd=cwd,
        rlimits=launch.rlimits if launch else None,
        pass_fds=launch.fds if launch else (),
    )
    for fd in launch.fds if launch else ():
        os.close(fd)
    await process.communicate()
    return time.perf_counter() - started, _children_cpu() - cpu_before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def main() -> None:
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="toolmesh-bench-")), stdio_sandbox_paths_read_only=SANDBOX_PATHS
    )
    sandbox_mode = mode(settings)
    if sandbox_mode.kind != "bubblewrap":
        raise SystemExit(sandbox_mode.describe())
    await connect_seconds(settings, True)  # warm the page cache for both
    plain, boxed = [], []
    for _ in range(RUNS):
        plain.append(await connect_seconds(settings, False))
        boxed.append(await connect_seconds(settings, True))
    starts: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(RUNS * 3):
        for sandboxed in (False, True):
            starts[sandboxed].append(await start_seconds(settings, sandboxed))
    result = {
        "bench": "stdio_sandbox",
        "runs": RUNS,
        "start_true_plain_s": round(statistics.median(w for w, _ in starts[False]), 4),
        "start_true_sandboxed_s": round(statistics.median(w for w, _ in starts[True]), 4),
        "start_true_plain_cpu_s": round(statistics.median(c for _, c in starts[False]), 4),
        "start_true_sandboxed_cpu_s": round(statistics.median(c for _, c in starts[True]), 4),
        "connect_plain_s": round(statistics.median(plain), 3),
        "connect_sandboxed_s": round(statistics.median(boxed), 3),
        "added_s": round(statistics.median(b - p for p, b in zip(plain, boxed, strict=True)), 3),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
