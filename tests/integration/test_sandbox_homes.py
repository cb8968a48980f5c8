"""A removed STDIO server's private home goes with it, and its cleanup never reaches the host.

The hostile peer (tests/peers/hostile_stdio.py) plants symlinks to host paths and hard-to-remove
directories in its home; removing the server must delete the home and nothing those symlinks name.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import RoleProcess, System, eventually, running_system
from tests.peers.launch import demo_args
from toolmesh.platform import metrics
from toolmesh.platform.store.pool import open_pool
from toolmesh.sandbox.homes import homes_dir
from toolmesh_session_worker.homes import HomeSweeper

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


def _sweep_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "toolmesh.session_worker" and r.levelno == logging.WARNING]


def _reconcile_rounds() -> float:
    return metrics.registry().get_sample_value("mcp_aggregator_reconcile_rounds_total") or 0.0


async def test_homes_that_cannot_be_listed_do_not_stop_the_reconcile_rounds(
    nats_url: str, database_url: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """The homes directory cannot be listed (a file stands in its place): each reconcile round still
    finishes, at its own pace, and the failure is logged once, not once a round."""
    caplog.set_level(logging.INFO, logger="toolmesh")
    homes_dir(tmp_path).write_text("not a directory")
    async with running_system(nats_url, database_url, roles=["session-worker"], data_dir=tmp_path):
        started = _reconcile_rounds()
        await eventually(lambda: _reconcile_rounds() >= started + 3, what="three reconcile rounds finished")
    assert len(_sweep_warnings(caplog)) == 1, [r.getMessage() for r in _sweep_warnings(caplog)]
    assert not [r for r in caplog.records if r.name == "toolmesh.platform.supervision"]  # the reconciler never broke


async def test_a_store_error_in_the_sweep_is_logged_once_and_the_home_kept(
    database_url: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Postgres cannot say which servers were removed (here: no schema): nothing is removed, the
    sweep returns, and the same failure is not logged again on the next rounds."""
    caplog.set_level(logging.INFO, logger="toolmesh")
    home = homes_dir(tmp_path) / str(uuid.uuid4())
    home.mkdir(parents=True)
    db = await open_pool(database_url, migrate=False)
    try:
        sweeper = HomeSweeper(db, tmp_path)
        for _ in range(3):
            assert await sweeper.sweep(()) == []
    finally:
        await db.close()
    assert home.is_dir()
    assert len(_sweep_warnings(caplog)) == 1, [r.getMessage() for r in _sweep_warnings(caplog)]
