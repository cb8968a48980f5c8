"""CPU time of client commands of the ``toolmesh`` CLI, against a ``toolmesh up`` this script starts.

Each command runs ``RUNS`` times as a fresh process; the CPU time (user + system) of each run is
read from the kernel's accounting of reaped children, and the median is reported, with the median
wall time beside it. One JSON line::

    python bench/cli_startup.py
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.peers.launch import DEMO_SERVER, free_port  # noqa: E402
from toolmesh.platform import processes  # noqa: E402
from toolmesh.platform.polling import wait_until  # noqa: E402

RUNS = int(os.environ.get("TOOLMESH_BENCH_RUNS", "7"))
START_SECONDS = 120.0
TOOLMESH = shutil.which("toolmesh", path=str(Path(sys.executable).parent)) or "toolmesh"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    """Median CPU and wall seconds of ``argv`` over ``RUNS`` runs (each must exit 0)."""
    cpu, wall = [], []
    for _ in range(RUNS):
        before, started = _children_cpu(), time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
        wall.append(time.perf_counter() - started)
        cpu.append(_children_cpu() - before)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
    return {"cpu_s": round(statistics.median(cpu), 3), "wall_s": round(statistics.median(wall), 3)}


def _wait_ready(url: str, token_file: Path, up: subprocess.Popen[bytes]) -> str:
    def ready() -> str | None:
        if up.poll() is not None:
            raise RuntimeError(f"toolmesh up exited with {up.returncode}")
        if not token_file.exists():
            return None
        token = token_file.read_text().strip()
        response = httpx.get(f"{url}/api/v1/aggregator/health", headers={"Authorization": f"Bearer {token}"})
        return token if response.status_code == 200 else None

    if token := wait_until(ready, START_SECONDS, interval=0.2, retry_on=(httpx.TransportError,)):
        return token
    raise TimeoutError("toolmesh up did not answer")


def _register_demo(url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    body = {
        "name": "demo",
        "transport_type": "STDIO",
        "connection_config": {"command": sys.executable, "args": [str(DEMO_SERVER), "--transport", "stdio"]},
    }
    with httpx.Client(base_url=url, headers=headers, timeout=30) as api:
        server = api.post("/api/v1/aggregator/servers", json=body).raise_for_status().json()

        def connected() -> bool:
            return bool(api.get(f"/api/v1/aggregator/servers/{server['id']}").json()["status"] == "CONNECTED")

        if not wait_until(connected, START_SECONDS, interval=0.2):
            raise TimeoutError("the demo server did not connect")


def main() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="toolmesh-bench-cli-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLMESH_", "MCP_AGGREGATOR_"))}
    env.update(TOOLMESH_DATA_DIR=str(data_dir), TOOLMESH_URL=url)
    up = processes.spawn([TOOLMESH, "up", "--data-dir", str(data_dir), "--port", str(port)], env=env)
    try:
        token = _wait_ready(url, data_dir / "admin-token", up)
        _register_demo(url, token)
        results = {
            "help": measure([TOOLMESH, "--help"], env),
            "servers_list": measure([TOOLMESH, "servers", "list"], env),
            "search": measure([TOOLMESH, "search", "echo a message"], env),
            "servers_list_json": measure([TOOLMESH, "servers", "list", "--json"], env),
        }
    finally:
        processes.stop_sync(up, signal.SIGTERM, 60)
        shutil.rmtree(data_dir, ignore_errors=True)
    print(json.dumps({"benchmark": "cli_startup", "runs": RUNS, **results}))


if __name__ == "__main__":
    main()
