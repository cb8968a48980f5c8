"""Every toolmesh role as its own OS process against one NATS and one Postgres (the fault tests' harness).

Two gateways, two session-workers, a classifier-worker, a health-worker, a projector and an indexer,
each ``python -m toolmesh_cli.main <role>`` started and stopped through ``toolmesh.platform.processes``, its
output in a log file of its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from tests.harness import ADMIN_TOKEN, System, eventually, make_settings, settings_env
from toolmesh.platform import processes
from toolmesh.platform.config import Settings
from toolmesh.platform.runtime import open_backends
from toolmesh_cli.embedded import free_port

ROLES = {
    "gateway": 2,
    "session-worker": 2,
    "classifier-worker": 1,
    "health-worker": 1,
    "projector": 1,
    "indexer": 1,
}
STOP_SECONDS = 20.0
HEALTH = "/api/v1/aggregator/health"


@dataclass
class Role:
    """One role process and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    port: int | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        """True while the process has not exited."""
        return not processes.exited(self.process)

    def log_tail(self, lines: int = 40) -> str:
        """The end of the role's log, for failure messages."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return f"--- {self.name} pid {self.pid} ---\n" + "\n".join(text.splitlines()[-lines:])


class Cluster:
    """The role processes of one toolmesh, an API client per gateway, and the backends for checks."""

    def __init__(self, settings: Settings, log_dir: Path) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.roles: list[Role] = []

    def start(self, name: str, **overrides: Any) -> Role:
        """Start one more ``name`` role process (a gateway gets a port of its own); ``overrides`` are
        settings of this process alone (e.g. ``nats_url`` of a proxy in front of NATS)."""
        port = free_port() if name == "gateway" else None
        settings = self.settings.model_copy(update=overrides) if overrides else self.settings
        env = {**settings_env(settings), "TOOLMESH_DATA_DIR": str(settings.data_dir)}
        if port is not None:
            env["TOOLMESH_PORT"] = str(port)
        index = sum(1 for r in self.roles if r.name == name)
        log_path = self.log_dir / f"{name}-{index}.log"
        log = log_path.open("ab")
        argv = [sys.executable, "-m", "toolmesh_cli.main", name]
        process = processes.spawn(argv, env={**_base_environment(), **env}, stdout=log)
        role = Role(name, process, log_path, port, log)
        self.roles.append(role)
        return role

    def of(self, name: str) -> list[Role]:
        """The role processes named ``name`` (dead ones included)."""
        return [r for r in self.roles if r.name == name]

    def by_pid(self, pid: int) -> Role:
        """The role process with this pid."""
        return next(r for r in self.roles if r.pid == pid)

    def logs(self) -> str:
        """The tails of every role's log."""
        return "\n".join(r.log_tail() for r in self.roles)

    async def stop(self) -> dict[str, int | None]:
        """SIGTERM every role (then kill what is left); their exit codes by ``name-pid``."""
        for role in self.roles:
            processes.send(role.process, signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for role in self.roles:
            await processes.wait_exit(role.process, STOP_SECONDS)
            await processes.stop(role.process, signal.SIGKILL, 0)  # whatever is left of its tree
            codes[f"{role.name}-{role.pid}"] = role.process.poll()
            if role._log is not None:
                role._log.close()
        return codes


def _base_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TOOLMESH_")}


async def wait_answering(api: httpx.AsyncClient, timeout: float = 60.0) -> None:
    """Wait until a gateway answers its health endpoint."""

    async def probe() -> bool:
        try:
            return (await api.get(HEALTH)).status_code == 200
        except httpx.TransportError:
            return False

    await eventually(probe, timeout=timeout, what=f"{api.base_url} to answer")


@contextlib.asynccontextmanager
async def running_cluster(
    nats_url: str, database_url: str, log_dir: Path, roles: dict[str, int] | None = None, **overrides: Any
) -> AsyncIterator[tuple[Cluster, list[System]]]:
    """Every role as its own process (``roles``: how many of each, default ``ROLES``); yields the
    cluster and a ``System`` (API client) per gateway."""
    settings = make_settings(nats_url, database_url, **overrides)
    cluster = Cluster(settings, log_dir)
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        for name, count in (ROLES if roles is None else roles).items():
            for _ in range(count):
                cluster.start(name)
        async with contextlib.AsyncExitStack() as stack:
            backends = await stack.enter_async_context(open_backends(settings, "fault-test"))
            systems = []
            for gateway in cluster.of("gateway"):
                api = await stack.enter_async_context(
                    httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway.port}", headers=headers, timeout=60)
                )
                await wait_answering(api)
                systems.append(System(settings=settings, backends=backends, api=api))
            yield cluster, systems
    except BaseException:
        print(cluster.logs(), file=sys.stderr)
        raise
    finally:
        codes = await cluster.stop()
        print(f"role exit codes: {codes}", file=sys.stderr)
