"""``toolmesh up`` speaks to a person on a terminal (short log lines, then the banner with the admin
token, no JSON) and to machines anywhere else (JSON log lines)."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.harness import eventually
from toolmesh.platform import processes
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.e2e
START_SECONDS = 90.0
STOP_SECONDS = 60.0
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ADMIN_TOKEN = re.compile(r"admin token \(shown once, kept in (\S+)\): (\S+)")
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")


class Output:
    """Everything a child writes on a file descriptor, drained by a thread so the child never blocks."""

    def __init__(self, fd: int) -> None:
        self._fd, self._chunks = fd, bytearray()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                return
            if not chunk:
                return
            self._chunks += chunk

    def text(self) -> str:
        """What was written so far, without colours and cursor moves."""
        return ANSI.sub("", bytes(self._chunks).decode(errors="replace")).replace("\r\n", "\n")

    def finish(self) -> str:
        """Everything, once the writers are gone."""
        self._thread.join(STOP_SECONDS)
        os.close(self._fd)
        return self.text()


def _up(data_dir: Path, port: int, out: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLMESH_", "MCP_AGGREGATOR_"))}
    return processes.spawn(
        [sys.executable, "-m", "toolmesh_cli.main", "up", "--data-dir", str(data_dir), "--port", str(port)],
        env=env,
        stdout=out,
        stderr=out,
    )


async def _run_until_token(data_dir: Path, port: int, reader: int, writer: int) -> str:
    """Start ``toolmesh up`` writing to ``writer``; once it has shown its admin token, stop it; all it wrote."""
    up = _up(data_dir, port, writer)
    os.close(writer)
    output = Output(reader)
    try:
        await eventually(lambda: ADMIN_TOKEN.search(output.text()), timeout=START_SECONDS, what="the admin token")
        processes.send(up, signal.SIGTERM)
        assert processes.wait_exit_sync(up, STOP_SECONDS), "toolmesh up did not stop after SIGTERM"
    finally:
        processes.stop_sync(up, signal.SIGKILL, 0)
    assert up.wait() == 0, output.text()[-3000:]
    return output.finish()


def _token_shown(text: str, data_dir: Path) -> None:
    match = ADMIN_TOKEN.search(text)
    assert match is not None, text[-3000:]
    assert match[1] == str(data_dir / "admin-token")
    assert match[2] == (data_dir / "admin-token").read_text().strip()


async def test_on_a_terminal_short_lines_then_the_banner_and_no_json(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    leader, follower = pty.openpty()
    text = await _run_until_token(data_dir, port, leader, follower)
    _token_shown(text, data_dir)
    assert '{"ts"' not in text, text[-3000:]
    lines = [line.rsplit("\r", 1)[-1] for line in text.splitlines()]
    listening = next(
        i for i, line in enumerate(lines) if line.endswith(f"HTTP API listening on http://127.0.0.1:{port}")
    )
    assert LOG_LINE.match(lines[listening]) and lines[listening].split()[1:3] == ["INFO", "gateway"]
    # the banner comes once the gateway listens, in one piece: no log line inside it
    banner = [i for i, line in enumerate(lines) if line.startswith("toolmesh is up: ")]
    token = next(i for i, line in enumerate(lines) if ADMIN_TOKEN.search(line))
    assert len(banner) == 1 and listening < banner[0] < token, text[-3000:]
    assert not [line for line in lines[banner[0] : token] if LOG_LINE.match(line)]
    # quiet: other libraries' INFO records stay off the terminal
    assert "Started server process" not in text and "StreamableHTTP session manager" not in text
    assert "role gateway stopped" in text  # toolmesh's own events still show


async def test_without_a_terminal_json_lines(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    reader, writer = os.pipe()
    text = await _run_until_token(data_dir, port, reader, writer)
    _token_shown(text, data_dir)
    records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    listening = [r for r in records if r["msg"] == f"HTTP API listening on http://127.0.0.1:{port}"]
    assert [(r["level"], r["logger"]) for r in listening] == [("INFO", "toolmesh.gateway")], text[-3000:]
    assert not [line for line in text.splitlines() if LOG_LINE.match(line)], text[-3000:]
