"""``toolmesh up`` as a real process for the e2e tests: start it on a free port with a config and
its own data dir, drive the ``toolmesh`` command against it, wait for a condition, stop it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.harness import SANDBOX_PATHS
from toolmesh.platform import processes
from toolmesh.platform.polling import wait_until
from toolmesh_cli.embedded import free_port

TOOLMESH = shutil.which("toolmesh", path=str(Path(sys.executable).parent)) or "toolmesh"
START_SECONDS = 90.0
SETTLE_SECONDS = 60.0
STOP_SECONDS = 30.0


@dataclass
class Up:
    """A running ``toolmesh up`` and how to reach it."""

    process: subprocess.Popen[bytes]
    data_dir: Path
    env: dict[str, str]
    log: Path

    def cli(self, *args: str, expect: int | None = 0) -> subprocess.CompletedProcess[str]:
        """Run ``toolmesh ARGS`` against this instance; check the exit code unless ``expect`` is None."""
        done = subprocess.run([TOOLMESH, *args], env=self.env, capture_output=True, text=True, timeout=60)
        if expect is not None:
            assert done.returncode == expect, (
                f"toolmesh {' '.join(args)}: {done.returncode}\n{done.stdout}{done.stderr}"
            )
        return done

    def cli_json(self, *args: str) -> Any:
        """``toolmesh ARGS --json``, parsed."""
        return json.loads(self.cli(*args, "--json").stdout)

    def servers(self) -> dict[str, dict[str, Any]]:
        """The registered servers by name."""
        return {s["name"]: s for s in self.cli_json("servers", "list")["servers"]}


def clean_env(data_dir: Path, port: int) -> dict[str, str]:
    """This process's environment without toolmesh settings, pointed at ``data_dir`` and ``port``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLMESH_", "MCP_AGGREGATOR_"))}
    env.update(TOOLMESH_DATA_DIR=str(data_dir), TOOLMESH_URL=f"http://127.0.0.1:{port}", PYTHONUNBUFFERED="1")
    env["TOOLMESH_STDIO_SANDBOX_PATHS_READ_ONLY"] = json.dumps(SANDBOX_PATHS)  # the demo server's script
    return env


def start(data_dir: Path, config: Path, log: Path, **settings: str) -> Up:
    """``toolmesh up`` with ``config``, and ``settings`` as environment variables."""
    port = free_port()
    env = {**clean_env(data_dir, port), **settings}
    with log.open("ab") as out:
        process = processes.spawn(
            [TOOLMESH, "up", "--data-dir", str(data_dir), "--port", str(port), "--config", str(config)],
            env=env,
            stdout=out,
        )
    return Up(process, data_dir, env, log)


def stop(up: Up) -> int:
    """SIGTERM, then its exit status; fails the test (after a SIGKILL) if it does not stop in time."""
    processes.send(up.process, signal.SIGTERM)
    if processes.wait_exit_sync(up.process, STOP_SECONDS):
        return up.process.wait()
    processes.stop_sync(up.process, signal.SIGKILL, 0)
    pytest.fail(f"toolmesh up did not stop within {STOP_SECONDS:.0f} s after SIGTERM")


@contextlib.contextmanager
def running(data_dir: Path, config: Path, log: Path, **settings: str) -> Iterator[Up]:
    """``toolmesh up`` with the config until the block exits (killed with what it started)."""
    up = start(data_dir, config, log, **settings)
    try:
        yield up
    finally:
        processes.stop_sync(up.process, signal.SIGKILL, 0)


@contextlib.contextmanager
def answering(folder: Path, **settings: str) -> Iterator[Up]:
    """``toolmesh up`` with no servers, its data and log in ``folder``, once ``servers list`` answers."""
    config = folder / "toolmesh.yaml"
    config.write_text(json.dumps({"servers": []}))
    with running(folder / "data", config, folder / "up.log", **settings) as up:

        def answers() -> bool:
            return up.cli("servers", "list", expect=None).returncode == 0

        wait_for("toolmesh up to answer", answers, up, START_SECONDS)
        yield up


def wait_for(what: str, check: Callable[[], Any], up: Up, seconds: float) -> Any:
    """Poll ``check`` until it returns something truthy; fail with the last value at the deadline."""
    last: list[Any] = [None]

    def attempt() -> Any:
        assert up.process.poll() is None, f"toolmesh up exited with {up.process.returncode}:\n{up.log.read_text()}"
        try:
            last[0] = check()
        except (AssertionError, json.JSONDecodeError) as exc:
            last[0] = exc
            return None
        return last[0]

    if result := wait_until(attempt, seconds, interval=0.2):
        return result
    pytest.fail(f"timed out waiting for {what}; last: {last[0]!r}\n{up.log.read_text()[-3000:]}")


def statuses(up: Up, *names: str) -> dict[str, str]:
    """The status of each named server, ``missing`` for one not registered."""
    servers = up.servers()
    return {n: servers[n]["status"] if n in servers else "missing" for n in names}


def settled(up: Up, expected: dict[str, str]) -> Callable[[], bool]:
    """A check for ``wait_for``: every named server has its expected status."""
    return lambda: statuses(up, *expected) == expected
