"""A running toolmesh for tests: roles in this process (or as real subprocesses) on real backends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil

from toolmesh.credentials import CredentialBox
from toolmesh.platform import processes
from toolmesh.platform.config import Settings
from toolmesh.platform.polling import poll_until
from toolmesh.platform.runtime import Backends, open_backends
from toolmesh_cli.embedded import free_port
from toolmesh_cli.roles import ROLES, run_roles, seed_owner_key, streams_of

ADMIN_TOKEN = "test-admin-token"
CREDENTIAL_KEY = "test-credential-key"
T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[1]
TEST_CACHE = Path(os.environ.get("TOOLMESH_TEST_CACHE", Path.home() / ".cache" / "toolmesh-tests"))
TEST_CACHE.mkdir(parents=True, exist_ok=True)
SANDBOX_PATHS = tuple(
    str(path) for path in (REPO_ROOT, TEST_CACHE, REPO_ROOT.parent / "shared" / "tools") if path.is_dir()
)
"""What the test peers' STDIO children read besides their interpreter: the checkout (peer scripts), the
npm cache of server-everything and the Node preload binding it to loopback."""

FAST = {
    "stdio_sandbox_paths_read_only": SANDBOX_PATHS,
    "lease_ttl_seconds": 3.0,
    "lease_renew_seconds": 0.5,
    "reconcile_interval_seconds": 0.5,
    "connect_backoff_seconds": (0.2, 0.4, 0.8),
    "connection_timeout_seconds": 20.0,
    "projection_wait_seconds": 5.0,
    # Tests drive bursts of hundreds of calls with one key (EC-007); the limiter has tests of its own.
    "rate_limit_per_second": 0.0,
    "namespace_calls_per_second": 0.0,
    # Every role, the peers and the test's client share one event loop here, so its lag is the test
    # session's, not a deployment's; shedding on it has tests of its own (and the fault tests' processes).
    "shed_loop_lag_ms": 0.0,
}


def make_settings(nats_url: str, database_url: str, **overrides: Any) -> Settings:
    """Settings tuned for tests: short leases and backoffs, a free port, fixed secrets."""
    values: dict[str, Any] = {
        "nats_url": nats_url,
        "database_url": database_url,
        "port": free_port(),
        "admin_token": ADMIN_TOKEN,
        "data_dir": Path(tempfile.mkdtemp(prefix="toolmesh-data-")),  # the embedded index lives here
        "credential_key": CREDENTIAL_KEY,
        **FAST,
        **overrides,
    }
    return Settings(**values)


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that gives a subprocess the same settings."""
    env = {
        "TOOLMESH_NATS_URL": settings.nats_url or "",
        "TOOLMESH_DATABASE_URL": settings.database_url or "",
        "TOOLMESH_ADMIN_TOKEN": settings.admin_token or "",
        "MCP_CREDENTIAL_KEY": settings.credential_key or "",
        "MCP_AGGREGATOR_CONNECTION_TIMEOUT": str(settings.connection_timeout_seconds),
        "TOOLMESH_PORT": str(settings.port),
        "TOOLMESH_NATS_REPLICAS": str(settings.nats_replicas),
    }
    for key in FAST:
        value = getattr(settings, key)
        env[f"TOOLMESH_{key.upper()}"] = json.dumps(list(value)) if isinstance(value, tuple) else str(value)
    return env


def credential_box(settings: Settings) -> CredentialBox:
    """The box of the settings' credential key and previous keys."""
    return CredentialBox.from_settings(settings.credential_key, settings.credential_previous_keys)


async def eventually(
    probe: Callable[[], Awaitable[T | None]] | Callable[[], T | None], *, timeout: float = 30.0, what: str = ""
) -> T:
    """Poll ``probe`` (sync or async) until it returns something truthy; fail with ``what`` after ``timeout``."""
    last = await poll_until(probe, timeout)
    if last:
        return last
    raise AssertionError(f"timed out after {timeout}s waiting for {what or probe}; last value {last!r}")


@dataclass
class System:
    """A toolmesh under test and an authenticated HTTP client for its API."""

    settings: Settings
    backends: Backends
    api: httpx.AsyncClient

    async def register(self, name: str, transport: str, config: dict[str, Any], **fields: Any) -> dict[str, Any]:
        """Register a server and return the 201 body."""
        body = {"name": name, "transport_type": transport, "connection_config": config, **fields}
        response = await self.api.post("/api/v1/aggregator/servers", json=body)
        assert response.status_code == 201, response.text
        result: dict[str, Any] = response.json()
        return result

    async def server(self, server_id: str) -> dict[str, Any]:
        """``GET /servers/{id}``."""
        response = await self.api.get(f"/api/v1/aggregator/servers/{server_id}")
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    async def wait_status(self, server_id: str, status: str, *, timeout: float = 30.0) -> dict[str, Any]:
        """Poll until the server has ``status``; returns its detail."""

        async def probe() -> dict[str, Any] | None:
            detail = await self.server(server_id)
            return detail if detail["status"] == status else None

        return await eventually(probe, timeout=timeout, what=f"{server_id} to be {status}")

    async def wait_connected(self, server_id: str, *, timeout: float = 30.0) -> dict[str, Any]:
        """Poll until the server is CONNECTED and its tools are projected."""

        async def probe() -> dict[str, Any] | None:
            detail = await self.server(server_id)
            return detail if detail["status"] == "CONNECTED" and detail["tool_count"] > 0 else None

        return await eventually(probe, timeout=timeout, what=f"{server_id} to be connected with tools")

    async def create_key(self, name: str, role: str, **fields: Any) -> dict[str, Any]:
        """Create an API key as the owner; the 201 body (``id``, ``token``, ...)."""
        response = await self.api.post("/api/v1/auth/keys", json={"name": name, "role": role, **fields})
        assert response.status_code == 201, response.text
        result: dict[str, Any] = response.json()
        return result

    def client_as(self, token: str) -> httpx.AsyncClient:
        """A client of the API that authenticates with ``token`` (use it in ``async with``)."""
        return httpx.AsyncClient(
            base_url=str(self.api.base_url), headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    async def history(self, server_id: str) -> list[str]:
        """Event types of the server's connection history."""
        response = await self.api.get(f"/api/v1/aggregator/servers/{server_id}/history")
        return [entry["event_type"] for entry in response.json()]


@contextlib.asynccontextmanager
async def running_system(
    nats_url: str, database_url: str, roles: list[str] | None = None, **overrides: Any
) -> AsyncIterator[System]:
    """Run the given roles (all by default) in this process until the block exits."""
    settings = make_settings(nats_url, database_url, **overrides)
    stop = asyncio.Event()
    async with open_backends(settings, "test", streams=streams_of(roles) if roles else None) as backends:
        await seed_owner_key(backends, ADMIN_TOKEN)
        task = asyncio.create_task(
            run_roles(roles or list(ROLES), backends, credential_box(settings), stop), name="roles"
        )
        base = f"http://{settings.host}:{settings.port}"
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as api:
            if "gateway" in (roles or list(ROLES)):
                await _wait_http(api)
            try:
                yield System(settings=settings, backends=backends, api=api)
            finally:
                stop.set()
                await _stopped(task, 30)


async def _stopped(roles: asyncio.Task[None], timeout: float) -> None:
    """Wait for the roles to stop; if they do not within ``timeout``, print where every task of the
    loop is waiting (the role that holds the shutdown up) before failing."""
    try:
        await asyncio.wait_for(asyncio.shield(roles), timeout)
    except TimeoutError:
        for pending in asyncio.all_tasks():
            if not pending.done() and pending is not asyncio.current_task():
                print(f"--- task {pending.get_name()} still running:", file=sys.stderr)
                pending.print_stack(file=sys.stderr)
        roles.cancel()
        raise


async def _wait_http(api: httpx.AsyncClient) -> None:
    async def probe() -> bool:
        try:
            return (await api.get("/api/v1/aggregator/health")).status_code == 200
        except httpx.TransportError:
            return False

    await eventually(probe, timeout=20, what="the gateway to answer")


class RoleProcess:
    """One role as a real ``toolmesh <role>`` subprocess (for kill -9 tests)."""

    def __init__(self, role: str, settings: Settings, *extra_args: str, env: dict[str, str] | None = None) -> None:
        self.role = role
        environ = {**os.environ, **settings_env(settings), "TOOLMESH_WORKER_ID": "", **(env or {})}
        environ.pop("TOOLMESH_WORKER_ID")
        self.process = processes.spawn(
            [sys.executable, "-m", "toolmesh_cli.main", role, *extra_args], env=environ, stderr=subprocess.PIPE
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL the role process alone (its children must die by themselves)."""
        processes.kill(self.process)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        processes.send(self.process, signal.SIGTERM)
        return self.process.wait(timeout)

    def stderr_text(self) -> str:
        """What the process logged (after it exited)."""
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")


def processes_running(fragment: str) -> list[int]:
    """Pids of live processes whose command line contains ``fragment``: a STDIO server's own process,
    not the bubblewrap processes around it (whose command lines name it too)."""
    return [pid for pid in processes.matching(fragment) if not is_sandbox_wrapper(pid)]


def is_sandbox_wrapper(pid: int) -> bool:
    """True for a bubblewrap process: the wrapper around a sandboxed STDIO child, not the child."""
    try:
        return psutil.Process(pid).name() == "bwrap"
    except psutil.Error:
        return False


@contextlib.asynccontextmanager
async def second_gateway(
    system: System,
    ready: Callable[[RoleProcess, int], Awaitable[bool]] | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[tuple[RoleProcess, int]]:
    """Replica B: a ``toolmesh gateway`` process (``env`` besides ``system``'s settings) beside
    ``system``'s own, on a port of its own, once it accepts connections (or ``ready(b, port)`` says
    so); the process and its port. Terminated after."""
    port = free_port()
    b = RoleProcess("gateway", system.settings, env={**(env or {}), "TOOLMESH_PORT": str(port)})
    try:
        await eventually(lambda: (ready or _accepts)(b, port), timeout=60, what="replica B to answer")
        yield b, port
    finally:
        b.terminate()


async def _accepts(_: RoleProcess, port: int) -> bool:
    """Whether something accepts connections on ``port``."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True
