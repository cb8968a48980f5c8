"""Three ``nats-server`` processes on loopback in one JetStream cluster, each with deploy/nats/cluster.conf
(its name, its own store, routes to the others, route authentication).

The servers take their users from the ``nats.conf`` next to the cluster file: deploy/nats/nats.conf (a
user per role, every password ``<user>-pw``), or one written here with the one user and password the
embedded NATS of ``toolmesh up`` has (``EmbeddedNats``), for the fault tests, whose own checks read the
event log by sequence, which deploy/nats/nats.conf grants no user."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.harness import eventually
from toolmesh.errors import BackendUnavailable
from toolmesh.platform import processes
from toolmesh.platform.bus.connection import connect_nats
from toolmesh_cli.embedded import free_port
from toolmesh_cli.embedded.nats import MAX_PAYLOAD, NATS_USER, nats_server_binary

DEPLOY_NATS = Path(__file__).parents[1] / "deploy" / "nats"
CLUSTER_CONF = DEPLOY_NATS / "cluster.conf"
DEPLOY_USERS = ("gateway", "session-worker", "health-worker", "projector", "indexer", "classifier-worker", "service")
NODES = ("n1", "n2", "n3")
ONCE = {"allow_reconnect": False, "max_reconnect_attempts": 0}


@dataclass
class Node:
    """One server of the cluster: its name (``server_name``), ports and store."""

    name: str
    port: int
    cluster_port: int
    store: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    def running(self) -> bool:
        return self.process is not None and not processes.exited(self.process)


@dataclass
class NatsCluster:
    """The three servers and the credentials every client uses."""

    directory: Path
    password: str
    nodes: dict[str, Node]
    deploy_users: bool = False
    """Whether the servers run deploy/nats/nats.conf (a user per role) rather than one user."""
    route_password: str = field(default_factory=lambda: secrets.token_urlsafe(16))

    def url(self, node: Node, *, credentials: bool = True) -> str:
        """``node``'s client URL, with the one user's credentials unless the servers run the deploy users."""
        user = "" if self.deploy_users or not credentials else f"{NATS_USER}:{self.password}@"
        return f"nats://{user}127.0.0.1:{node.port}"

    @property
    def seed_urls(self) -> str:
        """Every server's client URL, comma-separated: ``TOOLMESH_NATS_URL`` of a clustered deployment."""
        return ",".join(self.url(node) for node in self.nodes.values())

    def start(self, node: Node) -> None:
        """Start ``node``'s server on its store (a restart keeps its name, ports and data)."""
        routes = ", ".join(f"nats://127.0.0.1:{n.cluster_port}" for n in self.nodes.values())
        env = {
            **os.environ,
            "NATS_SERVER_NAME": node.name,
            "NATS_ROUTES": f"[{routes}]",
            "TOOLMESH_NATS_ROUTE_PASSWORD": self.route_password,
            **{deploy_password_variable(user): f"{user}-pw" for user in DEPLOY_USERS},
        }
        argv = [str(nats_server_binary()), "-c", str(self.directory / "cluster.conf")]
        argv += ["-a", "127.0.0.1", "-p", str(node.port), "--cluster_listen", f"nats://127.0.0.1:{node.cluster_port}"]
        argv += ["-sd", str(node.store)]
        node._log = node._log or node.log_path.open("ab")
        node.process = processes.spawn(argv, env=env, stdout=node._log, cwd=self.directory)

    def kill(self, name: str) -> None:
        """SIGKILL the server ``name`` (no shutdown: its peers notice it gone)."""
        process = self.nodes[name].process
        assert process is not None
        processes.kill(process)

    async def wait_ready(self, timeout: float = 30.0) -> None:
        """Until every running server answers and JetStream has a meta leader (account info answers)."""

        login = {"user": "gateway", "password": "gateway-pw", "inbox_prefix": "_INBOX_gateway"}

        async def ready(node: Node) -> bool:
            try:
                nc = await connect_nats(
                    self.url(node), "probe", timeout=2, **ONCE, **(login if self.deploy_users else {})
                )
            except BackendUnavailable:
                return False
            try:
                await nc.jetstream(timeout=2).account_info()
                return True
            except Exception:  # no meta leader yet: nats-py raises a timeout or a 503 API error
                return False
            finally:
                await nc.close()

        for node in self.nodes.values():
            if node.running():
                await eventually(lambda n=node: ready(n), timeout=timeout, what=f"NATS {node.name} with JetStream")

    def logs(self, lines: int = 30) -> str:
        parts = []
        for node in self.nodes.values():
            text = node.log_path.read_text(errors="replace") if node.log_path.exists() else ""
            parts.append(f"--- nats {node.name} ---\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)


def deploy_password_variable(user: str) -> str:
    """The environment variable deploy/nats/nats.conf reads ``user``'s password from."""
    return f"TOOLMESH_NATS_{user.upper().replace('-', '_')}_PASSWORD"


def _write_configs(directory: Path, password: str, deploy_users: bool) -> None:
    shutil.copy(CLUSTER_CONF, directory / "cluster.conf")
    if deploy_users:
        shutil.copy(DEPLOY_NATS / "nats.conf", directory / "nats.conf")
        return
    users = f'authorization {{\n  user: "{NATS_USER}"\n  password: "{password}"\n}}\n'
    (directory / "nats.conf").write_text(f"max_payload: {MAX_PAYLOAD}\njetstream: enabled\n{users}")


@contextlib.asynccontextmanager
async def nats_cluster(directory: Path, *, deploy_users: bool = False) -> AsyncIterator[NatsCluster]:
    """Three clustered servers on loopback ports, stores under ``directory``; stopped on exit. With
    ``deploy_users`` they run deploy/nats/nats.conf's users (password ``<user>-pw`` each)."""
    password = secrets.token_urlsafe(24)
    _write_configs(directory, password, deploy_users)
    nodes = {
        name: Node(name, free_port(), free_port(), directory / name / "jetstream", directory / f"{name}.log")
        for name in NODES
    }
    cluster = NatsCluster(directory, password, nodes, deploy_users)
    try:
        for node in nodes.values():
            cluster.start(node)
        await cluster.wait_ready()
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        for node in nodes.values():
            if node.process is not None:
                await processes.stop(node.process, signal.SIGTERM, 10)
            if node._log is not None:
                node._log.close()
