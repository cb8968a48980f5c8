"""``toolmesh.platform.processes`` against real processes: whole-tree stop, waiting, finding by data dir and port."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import psutil
import pytest

from toolmesh.platform import processes
from toolmesh.platform.polling import poll_until

pytestmark = pytest.mark.integration

# A parent that ignores SIGTERM, with a child (also ignoring it) that prints its pid, then both sleep.
STUBBORN_TREE = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"])
print(child.pid, flush=True)
time.sleep(3600)
"""


async def test_stop_kills_the_whole_tree_of_a_child_that_ignores_sigterm() -> None:
    parent = await processes.spawn_piped([sys.executable, "-c", STUBBORN_TREE], env=os.environ)
    assert parent.stdout is not None
    grandchild = int(await parent.stdout.readline())
    assert processes.children(parent.pid) == [grandchild]
    assert processes.parent_of(grandchild) == parent.pid

    await processes.stop(parent, signal.SIGTERM, grace=0.5)

    assert parent.returncode == -signal.SIGKILL
    assert await poll_until(lambda: not processes.alive(grandchild), 5)


async def test_graceful_stop_leaves_the_exit_code() -> None:
    child = processes.spawn([sys.executable, "-c", "import time; time.sleep(3600)"])
    assert processes.alive(child.pid) and not processes.exited(child)
    await processes.stop(child, signal.SIGTERM, grace=10)
    assert child.returncode == -signal.SIGTERM
    assert not processes.alive(child.pid)


async def test_finds_processes_by_command_line_data_dir_and_port(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve = (
        f"import socket, time; s = socket.create_server(('127.0.0.1', {port})); print(1, flush=True); time.sleep(3600)"
    )
    child = await processes.spawn_piped([sys.executable, "-c", serve, str(tmp_path / "data")], env=os.environ)
    try:
        assert child.stdout is not None and await child.stdout.readline() == b"1\n"
        assert processes.listening_on(port) == [child.pid]
        assert processes.matching(serve) == [child.pid]
        assert processes.using_dir(tmp_path, psutil.Process(child.pid).name()) == [child.pid]
        assert str(tmp_path / "data") in (processes.command_line(child.pid) or "")
    finally:
        await processes.stop(child, signal.SIGKILL, 0)
    assert processes.command_line(child.pid) is None and processes.listening_on(port) == []
    assert processes.using_dir(tmp_path, psutil.Process().name()) == []
