"""One server whose lease this worker holds: its upstream session, status and pending calls."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client as NATS

from toolmesh.contracts.events import Event, ServerStatusChanged
from toolmesh.contracts.rpc import HealthVerdictResult, HealthVerdictRpc
from toolmesh.credentials import CredentialBox, expand_env, secret_values
from toolmesh.health import reconnect_delays
from toolmesh.lifecycle import ServerStatus, can_transition
from toolmesh.redaction import REDACTOR
from toolmesh.runtime import Backends
from toolmesh.store.queries import Row
from toolmesh.supervision import TaskSet
from toolmesh_session_worker.discovery import tools_snapshot
from toolmesh_session_worker.upstream import UpstreamError, UpstreamSession, open_session

log = logging.getLogger("toolmesh.session")
HELD_VERBS = frozenset({"call", "refresh"})
"""Requests that wait for a reconnect in progress instead of failing at once (EC-010)."""
Publish = Callable[[Event], Awaitable[int]]


class OwnedServer:
    """The live side of one server: connect with retries, discover, and close."""

    def __init__(self, backends: Backends, row: Row, box: CredentialBox, publish: Publish) -> None:
        self.server_id: str = row["id"]
        self.name: str = row["name"]
        self.status = ServerStatus(row["status"])
        self._transport: str = row["transport_type"]
        self._sealed: str = row["connection_config"]["sealed"]
        self._b = backends
        self._box = box
        self._publish = publish
        self.session: UpstreamSession | None = None
        self.draining = False
        self.tasks = TaskSet(f"server {self.name}")
        self.calls: dict[str, asyncio.Task[object]] = {}  # tool calls in flight by call id (for cancel)
        self.on_released: Callable[[OwnedServer], Awaitable[None]] | None = None
        self.reconnecting = False  # a health-driven reconnect is in progress (EC-010)
        self._settled = asyncio.Event()  # set whenever no reconnect is in progress
        self._settled.set()

    @property
    def nc(self) -> NATS:
        """The NATS connection this server's requests arrive on."""
        return self._b.nc

    @property
    def pending(self) -> int:
        """Calls in flight upstream."""
        return self.session.pending if self.session else 0

    async def set_status(self, status: ServerStatus, history: str, *, error: str | None = None, **details: Any) -> int:
        """Publish a status change (or a reconnect, keeping the status); returns its stream sequence."""
        previous = self.status
        if status != previous and not can_transition(previous, status):
            log.warning("ignoring %s -> %s", previous, status, extra={"server": self.name})
            return 0
        self.status = status
        return await self._publish(
            ServerStatusChanged(
                server_id=self.server_id,
                status=status,
                previous_status=previous,
                error_message=error,
                history=history,
                details={"worker": self._b.process_id, **details},
            )
        )

    async def connect(self, *, reconnect: bool = False) -> bool:
        """Open the session (retrying with backoff, BR-002), discover tools; False when it failed.

        ``reconnect`` (a session-worker took over a server the health checks put in ERROR) uses
        the EC-001 schedule instead: up to 5 attempts, 1, 2, 4, 8 s apart.
        """
        settings = self._b.settings
        reconnecting = self.status in (ServerStatus.CONNECTED, ServerStatus.DEGRADED)
        if self.status in (ServerStatus.DISCONNECTED, ServerStatus.ERROR):
            await self.set_status(ServerStatus.CONNECTING, "CONNECTING")
        if reconnect:
            delays = reconnect_delays(settings.reconnect_backoff_seconds, settings.reconnect_attempts)
        else:
            delays = list(settings.connect_backoff_seconds[: settings.connect_retries])
        error, attempts = await self._open(delays)
        if self.session is None:
            await self.set_status(ServerStatus.ERROR, "ERROR", error=f"Connection failed: {error}", attempts=attempts)
            return False
        history = "RECONNECT" if reconnecting or reconnect else "CONNECTED"
        await self.set_status(ServerStatus.CONNECTED, history)
        await self.discover()
        log.info("connected", extra={"server": self.name, "span": "proxy.connect", "status": "SUCCESS"})
        return True

    async def _open(self, delays: list[float]) -> tuple[str, int]:
        """Try to open the session, pausing ``delays[i]`` after failed attempt ``i``; (last error, attempts)."""
        settings = self._b.settings
        config = expand_env(self._box.open(self._sealed), os.environ)
        REDACTOR.add(secret_values(config))
        error = ""
        for attempt in range(len(delays) + 1):
            try:
                self.session = await open_session(
                    self.name,
                    self._transport,
                    config,
                    connect_timeout=settings.connection_timeout_seconds,
                    on_tools_changed=self._tools_changed,
                    on_lost=self._lost,
                )
                return "", attempt + 1
            except UpstreamError as exc:
                error = str(exc)
                log.warning("connect attempt %d failed: %s", attempt + 1, error, extra={"server": self.name})
                if attempt < len(delays):
                    await asyncio.sleep(delays[attempt])
        return error, len(delays) + 1

    async def apply_verdict(self, verdict: HealthVerdictRpc) -> HealthVerdictResult:
        """Apply a BR-006 verdict of the health-worker: publish DEGRADED / RECOVERED, or reconnect."""
        if self.draining or self.reconnecting or self.status not in (ServerStatus.CONNECTED, ServerStatus.DEGRADED):
            return HealthVerdictResult(status=self.status, reconnecting=self.reconnecting)
        failures = verdict.consecutive_failures
        if verdict.reconnect:
            seq = await self._error_then_reconnect(
                verdict.history,
                f"Health check failed: {verdict.error}",
                source="health",
                consecutive_failures=failures,
            )
            return HealthVerdictResult(status=ServerStatus.ERROR, reconnecting=True, seq=seq)
        seq = await self.set_status(
            verdict.status, verdict.history, error=verdict.error, source="health", consecutive_failures=failures
        )
        return HealthVerdictResult(status=self.status, seq=seq)

    async def _error_then_reconnect(self, history: str, error: str, *, source: str, **details: Any) -> int:
        """Publish ERROR, then reconnect in the background (EC-001 backoff); returns the ERROR's sequence."""
        self.reconnecting = True
        self._settled.clear()
        seq = await self.set_status(ServerStatus.ERROR, history, error=error, source=source, **details)
        self.tasks.spawn(self._reconnect(source))
        return seq

    async def _reconnect(self, source: str) -> None:
        """EC-001/EC-003/EC-010: drop the dead or stale session and open a new one with backoff;
        ERROR after the last attempt."""
        settings = self._b.settings
        try:
            await self.close()
            await self.set_status(ServerStatus.CONNECTING, "RECONNECTING", source=source)
            delays = reconnect_delays(settings.reconnect_backoff_seconds, settings.reconnect_attempts)
            error, attempts = await self._open(delays)
            if self.session is None:
                await self.set_status(
                    ServerStatus.ERROR,
                    "ERROR",
                    error=f"Reconnect failed after {attempts} attempts: {error}",
                    attempts=attempts,
                )
                self.tasks.spawn(self.release())
                return
            await self.set_status(ServerStatus.CONNECTED, "RECONNECT", attempts=attempts)
            log.info("reconnected", extra={"server": self.name, "span": "proxy.reconnect", "status": "SUCCESS"})
        finally:
            self.reconnecting = False
            self._settled.set()
        try:
            await self.discover()
        except UpstreamError as exc:
            log.warning("tool discovery after reconnect failed: %s", exc, extra={"server": self.name})

    async def hold_while_reconnecting(self, timeout: float) -> None:
        """EC-010: a request arriving during a reconnect waits (up to ``timeout``) for it to settle."""
        if self.reconnecting:
            try:
                await asyncio.wait_for(self._settled.wait(), timeout)
            except TimeoutError:
                log.info("request still waiting for reconnect after %.1fs", timeout, extra={"server": self.name})

    async def discover(self) -> int:
        """Run ``tools/list`` and publish the snapshot; returns its stream sequence."""
        assert self.session is not None
        tools = await self.session.list_tools()
        snapshot = tools_snapshot(self.server_id, self.name, tools, self._b.settings.max_tools_per_server)
        return await self._publish(snapshot)

    async def _tools_changed(self) -> None:
        self.tasks.spawn(self.discover())

    async def _lost(self, reason: str) -> None:
        if self.draining or self.reconnecting or self.status is ServerStatus.DISCONNECTED:
            return
        log.error("session lost: %s", reason, extra={"server": self.name})
        # EC-003: calls in flight already answered 503; the reconnection is scheduled here.
        await self._error_then_reconnect("ERROR", f"Connection lost: {reason}", source="session_lost")

    async def drain(self, timeout: float) -> None:
        """Wait until calls in flight finish (or ``timeout`` passes)."""
        deadline = asyncio.get_running_loop().time() + timeout
        # The SDK exposes no "idle" signal for a session, so poll the in-flight count.
        while self.pending and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        """Close the upstream session (STDIO: its whole process group is killed)."""
        session, self.session = self.session, None
        if session is not None:
            await session.close()

    async def release(self) -> None:
        """Close and hand the lease back (the worker forgets this server)."""
        await self.close()
        if self.on_released is not None:
            await self.on_released(self)
