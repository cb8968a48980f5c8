"""``toolmesh up``: a kill -9 and a restart on the same data dir lose nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.harness import SANDBOX_PATHS, eventually, processes_running
from tests.peers.launch import DEMO_SERVER
from toolmesh.platform import processes
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.e2e
TOKEN = "e2e-admin-token"


def _start(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TOOLMESH_ADMIN_TOKEN": TOKEN, "TOOLMESH_LEASE_TTL_SECONDS": "3"}
    env["TOOLMESH_STDIO_SANDBOX_PATHS_READ_ONLY"] = json.dumps(SANDBOX_PATHS)  # the demo server's script
    env.pop("TOOLMESH_NATS_URL", None)
    env.pop("TOOLMESH_DATABASE_URL", None)
    return processes.spawn(
        [sys.executable, "-m", "toolmesh_cli.main", "up", "--data-dir", str(data_dir), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


async def _healthy(api: httpx.AsyncClient) -> bool:
    try:
        response = await api.get("/api/v1/aggregator/health")
    except httpx.TransportError:
        return False
    return response.status_code == 200 and all(v == "ok" for v in response.json()["checks"].values())


async def test_kill_9_and_restart_keep_servers_and_tools(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    marker = f"{DEMO_SERVER} --transport stdio --name survivor"
    first = _start(data_dir, port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as api:
            await eventually(lambda: _healthy(api), timeout=60, what="toolmesh up to be healthy")
            assert (await api.get("/api/v1/aggregator/health", headers={"Authorization": ""})).status_code == 401
            config = {
                "command": sys.executable,
                "args": [str(DEMO_SERVER), "--transport", "stdio", "--name", "survivor"],
            }
            body = {"name": "survivor", "transport_type": "STDIO", "connection_config": config}
            created = (await api.post("/api/v1/aggregator/servers", json=body)).json()

            async def connected() -> dict[str, object] | None:
                detail = (await api.get(f"/api/v1/aggregator/servers/{created['id']}")).json()
                return detail if detail["status"] == "CONNECTED" and detail["tool_count"] > 0 else None

            before = await eventually(connected, timeout=60, what="the server to connect")
            assert processes_running(marker)
            processes.kill(first)

            async def all_gone() -> bool:
                return not processes_running(marker) and not processes_running(str(data_dir))

            await eventually(all_gone, timeout=20, what="every child of the killed run to die")

            second = _start(data_dir, port)
            try:
                await eventually(lambda: _healthy(api), timeout=60, what="the restart to be healthy")
                after = await eventually(connected, timeout=60, what="the server to reconnect after restart")
                assert after["id"] == before["id"] and after["tool_count"] == before["tool_count"]
                tools = (await api.get(f"/api/v1/aggregator/servers/{created['id']}/tools")).json()
                assert "survivor.echo" in {t["name"] for t in tools["tools"]}
            finally:
                processes.send(second, signal.SIGTERM)
                assert await processes.wait_exit(second, 60) and second.returncode == 0
        assert not processes_running(marker) and not processes_running(str(data_dir))
    finally:
        processes.kill(first)
