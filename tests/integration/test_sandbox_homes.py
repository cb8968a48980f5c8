"""A removed STDIO server's private home goes with it, and its cleanup never reaches the host.

The hostile peer (tests/peers/hostile_stdio.py) plants symlinks to host paths and hard-to-remove
directories in its home; removing the server must delete the home and nothing those symlinks name.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import RoleProcess, System, eventually, running_system
from tests.peers.launch import demo_args
from toolmesh.sandbox_homes import homes_dir

pytestmark = pytest.mark.integration
HOSTILE = Path(__file__).parents[1] / "peers" / "hostile_stdio.py"
SERVERS = "/api/v1/aggregator/servers"


@pytest.fixture
def host_paths() -> Iterator[tuple[Path, Path]]:
    """A host file and a host directory (with a file) outside the data dir: what a symlink points at."""
    with tempfile.TemporaryDirectory(prefix="toolmesh-host-") as made:
        directory = Path(made) / "dir"
        directory.mkdir()
        (directory / "inner").write_text("host")
        (Path(made) / "file").write_text("host")
        yield Path(made) / "file", directory


def _intact(file: Path, directory: Path) -> None:
    assert file.read_text() == "host" and (directory / "inner").read_text() == "host"


async def _home_gone(home: Path) -> None:
    await eventually(lambda: not os.path.lexists(home), timeout=20, what=f"{home} to be removed")


async def _registered(system: System, name: str, args: list[str]) -> tuple[str, Path]:
    created = await system.register(name, "STDIO", {"command": sys.executable, "args": args})
    await system.wait_connected(created["id"], timeout=60)
    home = homes_dir(system.settings.data_dir) / created["id"]
    assert home.is_dir()
    return str(created["id"]), home


async def test_removing_a_server_removes_its_home_and_no_host_file(
    nats_url: str, database_url: str, host_paths: tuple[Path, Path]
) -> None:
    file, directory = host_paths
    async with running_system(nats_url, database_url) as system:
        hostile, home = await _registered(system, "hostile", [str(HOSTILE)])
        _, kept = await _registered(system, "keeper", demo_args("stdio", name="keeper"))
        call = {"name": "hostile.plant_traps", "arguments": {"targets": [str(file), str(directory)]}}
        planted = await system.api.post("/api/v1/tools/call", json=call)
        assert planted.status_code == 200, planted.text
        assert os.readlink(home / "link-0") == str(file) and os.readlink(home / "link-1") == str(directory)
        assert (home / "locked").is_dir() and (home / "d" / "d").is_dir()

        removed = await system.api.delete(f"{SERVERS}/{hostile}")
        assert removed.status_code == 204, removed.text
        await _home_gone(home)
        _intact(file, directory)
        assert kept.is_dir()  # a server still registered keeps its home


async def test_a_home_left_while_no_worker_ran_goes_at_the_next_worker_start(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        worker_env = {"TOOLMESH_DATA_DIR": str(system.settings.data_dir)}
        worker = RoleProcess("session-worker", system.settings, env=worker_env)
        try:
            server, home = await _registered(system, "crashed", demo_args("stdio", name="crashed"))
        finally:
            worker.kill()
            worker.process.wait(30)
        removed = await system.api.delete(f"{SERVERS}/{server}")
        assert removed.status_code == 204, removed.text
        assert home.is_dir()  # no worker ran to remove it
        restarted = RoleProcess("session-worker", system.settings, env=worker_env)
        try:
            await _home_gone(home)
        finally:
            assert restarted.terminate() == 0
