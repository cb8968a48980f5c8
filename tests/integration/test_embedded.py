"""The embedded NATS and Postgres servers: they serve, survive a crash, and leave nothing behind."""

from __future__ import annotations

import asyncio
import os
import pwd
import shlex
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import nats
import pytest
import pytest_asyncio

from toolmesh.platform import processes
from toolmesh.platform.polling import poll_until
from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres, EmbeddedServerError
from toolmesh_cli.embedded.postgres import SYSTEM_USER, postgres_install_dir

pytestmark = pytest.mark.integration

_ORPHAN_SCRIPT = """
import asyncio, sys
from pathlib import Path
from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres, EmbeddedServerError
from toolmesh_cli.embedded.postgres import SYSTEM_USER, postgres_install_dir

async def main() -> None:
    nats_server = EmbeddedNats(Path(sys.argv[1]) / "nats")
    postgres = EmbeddedPostgres(Path(sys.argv[1]) / "pg")
    await nats_server.start()
    await postgres.start()
    print(nats_server.pid, postgres.pid, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def _live_children() -> set[int]:
    """Pids of our live (non-zombie) child processes."""
    return set(processes.children(os.getpid()))


@pytest_asyncio.fixture(loop_scope="session", autouse=True)
async def no_process_left_behind(postgres_server_url: str, tmp_path: Path) -> AsyncIterator[None]:
    """Fail a test that leaves a child or a server on its temp dir running.

    Depends on the session Postgres so that it is already running when the baseline is taken.
    """
    before = _live_children()
    yield
    assert await poll_until(lambda: _live_children() <= before, 10.0), _live_children() - before
    for comm in ("postgres", "nats-server"):
        assert processes.using_dir(tmp_path, comm) == []


async def test_postgres_accepts_a_query(database_url: str) -> None:
    conn = await asyncpg.connect(database_url, timeout=10)
    try:
        assert await conn.fetchval("SELECT 40 + 2") == 42
        assert await conn.fetchval("SELECT current_database()") == database_url.rsplit("/", 1)[1]
    finally:
        await conn.close()


async def test_nats_jetstream_accepts_a_stream_and_a_publish(nats_url: str) -> None:
    nc = await nats.connect(nats_url, connect_timeout=5)
    try:
        assert nc.max_payload == 8 * 1024 * 1024
        js = nc.jetstream(timeout=5)
        await js.add_stream(name="TOOLMESH_TEST", subjects=["toolmesh.test.>"])
        ack = await js.publish("toolmesh.test.one", b"x" * (2 * 1024 * 1024))
        assert (ack.stream, ack.seq) == ("TOOLMESH_TEST", 1)
    finally:
        await nc.close()


async def test_embedded_nats_restarts_on_the_same_url_with_its_data(embedded_nats: EmbeddedNats) -> None:
    url = embedded_nats.url
    await _publish_one(url)
    await embedded_nats.stop()
    assert embedded_nats.pid is None
    await embedded_nats.start()
    assert embedded_nats.url == url
    assert await _read_first(url) == b"before"


async def test_postgres_restarts_after_sigkill_with_its_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "pg"
    crashed = EmbeddedPostgres(data_dir)
    await crashed.start()
    conn = await asyncpg.connect(crashed.url, timeout=10)
    await conn.execute("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before')")
    await conn.close()
    assert crashed.pid is not None
    processes.send(crashed.pid, signal.SIGKILL)
    assert (data_dir / "postmaster.pid").exists()

    async with EmbeddedPostgres(data_dir) as restarted:
        conn = await asyncpg.connect(restarted.url, timeout=10)
        try:
            assert await conn.fetchval("SELECT v FROM kept") == "before"
        finally:
            await conn.close()
    await crashed.stop()  # reaps the killed process


async def test_nats_restarts_after_sigkill_with_its_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "nats"
    crashed = EmbeddedNats(data_dir)
    await crashed.start()
    await _publish_one(crashed.url)
    assert crashed.pid is not None
    processes.send(crashed.pid, signal.SIGKILL)

    async with EmbeddedNats(data_dir) as restarted:
        assert await _read_first(restarted.url) == b"before"
    await crashed.stop()


async def test_postgres_kills_an_orphan_on_its_data_dir_and_restarts(tmp_path: Path) -> None:
    data_dir = tmp_path / "pg"
    async with EmbeddedPostgres(data_dir) as first:
        port = first.port
    orphan_argv = [str(postgres_install_dir() / "bin" / "postgres"), "-D", str(data_dir)]
    orphan_argv += ["-h", "127.0.0.1", "-p", str(port), "-k", str(data_dir)]
    account = pwd.getpwnam(SYSTEM_USER) if os.geteuid() == 0 else None
    shell = processes.spawn(  # exits at once, leaving postgres orphaned
        ["sh", "-c", f"{shlex.join(orphan_argv)} >/dev/null 2>&1 &"],
        cwd=data_dir,
        user=account.pw_uid if account else None,
        group=account.pw_gid if account else None,
    )
    assert await processes.wait_exit(shell, 10.0) and shell.returncode == 0
    assert await poll_until(lambda: len(processes.using_dir(data_dir, "postgres")) > 1, 20.0)
    orphans = processes.using_dir(data_dir, "postgres")

    async with EmbeddedPostgres(data_dir) as restarted:
        assert not any(processes.alive(pid) for pid in orphans)
        conn = await asyncpg.connect(restarted.url, timeout=10)
        await conn.close()


async def test_a_server_in_use_by_a_live_run_is_left_alone(tmp_path: Path) -> None:
    async with EmbeddedPostgres(tmp_path / "pg") as postgres, EmbeddedNats(tmp_path / "nats") as nats_server:
        with pytest.raises(EmbeddedServerError, match="in use"):
            await EmbeddedPostgres(tmp_path / "pg").start()
        with pytest.raises(EmbeddedServerError, match="in use"):
            await EmbeddedNats(tmp_path / "nats").start()
        conn = await asyncpg.connect(postgres.url, timeout=10)
        await conn.close()
        await _publish_one(nats_server.url)


async def test_servers_die_with_a_sigkilled_parent(tmp_path: Path) -> None:
    parent = await processes.spawn_piped([sys.executable, "-c", _ORPHAN_SCRIPT, str(tmp_path)], env=os.environ)
    assert parent.stdout is not None
    try:
        line = await asyncio.wait_for(parent.stdout.readline(), 60)
        server_pids = [int(pid) for pid in line.split()]
        assert len(server_pids) == 2 and all(processes.alive(pid) for pid in server_pids)
    finally:
        processes.send(parent, signal.SIGKILL)
        await processes.wait_exit(parent, 10.0)
    assert await poll_until(lambda: not any(processes.alive(pid) for pid in server_pids), 10.0)
    assert await poll_until(lambda: not processes.using_dir(tmp_path / "pg", "postgres"), 10.0)

    async with EmbeddedPostgres(tmp_path / "pg") as postgres, EmbeddedNats(tmp_path / "nats") as nats_server:
        assert postgres.pid is not None and nats_server.pid is not None


async def _publish_one(url: str) -> None:
    nc = await nats.connect(url, connect_timeout=5)
    try:
        js = nc.jetstream(timeout=5)
        await js.add_stream(name="TOOLMESH_KEPT", subjects=["toolmesh.kept.>"])
        await js.publish("toolmesh.kept.one", b"before")
    finally:
        await nc.close()


async def _read_first(url: str) -> bytes:
    nc = await nats.connect(url, connect_timeout=5)
    try:
        msg = await nc.jetstream(timeout=5).get_msg("TOOLMESH_KEPT", 1)
        assert msg.data is not None
        return msg.data
    finally:
        await nc.close()
