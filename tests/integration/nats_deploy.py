"""The nats-server of deploy/nats/nats.conf for the integration tests: started on a loopback port with
every user's password ``<user>-pw``, and connections as one of its users that record what the server
refuses them."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from tests.harness import eventually
from toolmesh.errors import BackendUnavailable
from toolmesh.platform import processes
from toolmesh.platform.bus.connection import connect_nats, nats_options
from toolmesh.platform.config import Settings
from toolmesh_cli.embedded import free_port
from toolmesh_cli.embedded.nats import nats_server_binary
from toolmesh_cli.roles import ROLES

NATS_CONF = Path(__file__).parents[2] / "deploy" / "nats" / "nats.conf"
USERS = [*ROLES, "service"]
ONCE = {"allow_reconnect": False, "max_reconnect_attempts": 0}
VIOLATION = "permissions violation"


def password_variable(user: str) -> str:
    """The environment variable deploy/nats/nats.conf reads ``user``'s password from."""
    return f"TOOLMESH_NATS_{user.upper().replace('-', '_')}_PASSWORD"


def role_settings(user: str) -> dict[str, Any]:
    """Settings overrides that connect as ``user`` with its inbox prefix (and check health often)."""
    credentials = {"nats_user": user, "nats_password": f"{user}-pw", "nats_inbox_prefix": f"_INBOX_{user}"}
    return {**credentials, "health_interval_seconds": 0.5}


@dataclass
class DeployNats:
    """A running deploy nats-server: where it listens and its log."""

    address: str
    log: Path

    def violations(self) -> list[str]:
        """The server's log lines about permission violations."""
        return [line for line in self.log.read_text().splitlines() if VIOLATION in line.lower()]


@contextlib.asynccontextmanager
async def deploy_nats(directory: Path) -> AsyncIterator[DeployNats]:
    """The nats-server of deploy/nats/nats.conf on a loopback port and a temp store, every user's
    password ``<user>-pw``."""
    port = free_port()
    argv = [str(nats_server_binary()), "-c", str(NATS_CONF), "-a", "127.0.0.1", "-p", str(port)]
    argv += ["-sd", str(directory / "jetstream")]
    env = {**os.environ, **{password_variable(user): f"{user}-pw" for user in USERS}}
    log_path = directory / "nats.log"
    with log_path.open("ab") as log:
        process = processes.spawn(argv, env=env, stdout=log, cwd=directory)
        try:
            address = f"nats://127.0.0.1:{port}"
            settings = Settings(**role_settings("projector"))

            async def answers() -> bool:
                try:
                    nc = await connect_nats(address, "probe", timeout=2, **ONCE, **nats_options(settings))
                except BackendUnavailable:
                    return False
                await nc.close()
                return True

            await eventually(answers, timeout=15, what="the deploy nats-server")
            yield DeployNats(address, log_path)
        finally:
            await processes.stop(process, signal.SIGTERM, 10)


@dataclass
class Spy:
    """A `service` connection that tries to listen where it should not."""

    nc: NATS
    errors: list[str] = field(default_factory=list)
    received: list[Msg] = field(default_factory=list)

    async def listen(self, subject: str) -> None:
        async def keep(msg: Msg) -> None:
            self.received.append(msg)

        await self.nc.subscribe(subject, cb=keep)
        await self.nc.flush()

    async def refused(self, what: str) -> bool:
        """Whether the server refused ``what`` (e.g. ``Subscription to "_INBOX.>"``); nats-py lower-cases it."""
        return any(f"{VIOLATION} for {what.lower()}" in error.lower() for error in self.errors)


@contextlib.asynccontextmanager
async def connection_as(address: str, user: str, **options: Any) -> AsyncIterator[Spy]:
    """A connection as ``user`` of the deploy config that records what the server refuses it."""
    spy = Spy(nc=NATS())

    async def on_error(exc: Exception) -> None:
        spy.errors.append(str(exc))

    spy.nc = await nats.connect(
        address, user=user, password=f"{user}-pw", error_cb=on_error, allow_reconnect=False, **options
    )
    try:
        yield spy
    finally:
        await spy.nc.close()


async def always_false() -> bool:
    """A check that never holds (for a name reservation: the holder is never gone)."""
    return False
