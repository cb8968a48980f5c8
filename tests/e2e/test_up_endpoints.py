"""``toolmesh up`` tells local services where it is (endpoints.json, 0600) and guards its NATS and Postgres."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import nats
import pytest

from tests.harness import eventually
from toolmesh.platform import processes
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.e2e
TOKEN = "e2e-endpoints-token"
STATE = "toolmesh.api.v1.aggregator.state"


def _start(data_dir: Path, port: int, out: Path) -> subprocess.Popen[bytes]:
    """``toolmesh up`` printing to ``out`` (a file: a pipe nobody reads while it runs could fill up)."""
    env = {**os.environ, "TOOLMESH_ADMIN_TOKEN": TOKEN}
    env.pop("TOOLMESH_NATS_URL", None)
    env.pop("TOOLMESH_DATABASE_URL", None)
    with out.open("wb") as printed:
        return processes.spawn(
            [sys.executable, "-m", "toolmesh_cli.main", "up", "--data-dir", str(data_dir), "--port", str(port)],
            env=env,
            stdout=printed,
            stderr=subprocess.STDOUT,
        )


async def test_up_writes_private_endpoints_and_its_nats_needs_them(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    printed = tmp_path / "up.out"
    up = _start(data_dir, port, printed)
    endpoints_file = data_dir / "endpoints.json"
    try:

        async def written() -> bool:
            return endpoints_file.is_file()

        await eventually(written, timeout=90, what="endpoints.json")
        assert stat.S_IMODE(endpoints_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(data_dir.stat().st_mode) & 0o066 == 0  # (root: Postgres's user may traverse it)
        secrets = [data_dir / "postgres" / "superuser.password", data_dir / "nats" / "credentials.json"]
        assert [stat.S_IMODE(path.stat().st_mode) for path in secrets] == [0o600, 0o600]
        endpoints = json.loads(endpoints_file.read_text())
        nats_url = urlsplit(endpoints["nats"])
        assert nats_url.hostname == "127.0.0.1" and nats_url.username and nats_url.password
        assert endpoints["postgres"].startswith("postgresql://") and endpoints["http"] == f"http://127.0.0.1:{port}"
        postgres_url = urlsplit(endpoints["postgres"])  # the embedded Postgres needs its password too
        assert postgres_url.hostname == "127.0.0.1" and postgres_url.password
        with pytest.raises(asyncpg.InvalidAuthorizationSpecificationError, match="password authentication failed"):
            await asyncpg.connect(host="127.0.0.1", port=postgres_url.port, user=postgres_url.username, timeout=10)
        conn = await asyncpg.connect(endpoints["postgres"], timeout=10)
        await conn.close()

        with pytest.raises(nats.errors.Error, match=r"(?i)authorization"):
            await nats.connect(f"nats://127.0.0.1:{nats_url.port}", allow_reconnect=False, max_reconnect_attempts=0)
        nc = await nats.connect(endpoints["nats"], connect_timeout=10)
        try:

            async def state() -> dict[str, object] | None:
                try:
                    msg = await nc.request(
                        "toolmesh.api.v1.aggregator.state",
                        b"{}",
                        timeout=5,
                        headers={"Authorization": f"Bearer {TOKEN}"},
                    )
                except nats.errors.Error:
                    return None  # the gateway is still starting
                reply: dict[str, object] = json.loads(msg.data)
                return reply

            reply = await eventually(state, timeout=60, what="the NATS API of toolmesh up")
            assert reply["ok"] is True
        finally:
            await nc.close()
        async with httpx.AsyncClient(base_url=endpoints["http"], headers={"Authorization": f"Bearer {TOKEN}"}) as api:
            assert (await api.get("/api/v1/aggregator/state")).status_code == 200
    finally:
        processes.send(up, signal.SIGTERM)
        up.wait(timeout=60)
    assert up.returncode == 0, printed.read_text()[-3000:]
    assert nats_url.password not in printed.read_text()  # printed without its credentials
    assert not endpoints_file.exists()  # nothing listens there any more
