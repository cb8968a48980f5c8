"""One server whose lease this worker holds: its upstream session, status and pending calls."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from toolmesh.contracts.events import Event, ServerStatusChanged
from toolmesh.credentials import CredentialBox, expand_env, secret_values
from toolmesh.lifecycle import ServerStatus, can_transition
from toolmesh.runtime import Backends
from toolmesh.store.queries import Row
from toolmesh.supervision import TaskSet
from toolmesh.redaction import REDACTOR
from toolmesh_session_worker.discovery import tools_snapshot
from toolmesh_session_worker.upstream import UpstreamError, UpstreamSession, open_session

log = logging.getLogger("toolmesh.session")
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
        self.on_released: Callable[[OwnedServer], Awaitable[None]] | None = None

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

    async def connect(self) -> bool:
        """Open the session (retrying with backoff, BR-002), discover tools; False when it failed."""
        settings = self._b.settings
        config = expand_env(self._box.open(self._sealed), os.environ)
        REDACTOR.add(secret_values(config))
        reconnecting = self.status in (ServerStatus.CONNECTED, ServerStatus.DEGRADED)
        if self.status in (ServerStatus.DISCONNECTED, ServerStatus.ERROR):
            await self.set_status(ServerStatus.CONNECTING, "CONNECTING")
        delays = list(settings.connect_backoff_seconds[: settings.connect_retries])
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
                break
            except UpstreamError as exc:
                error = str(exc)
                log.warning("connect attempt %d failed: %s", attempt + 1, error, extra={"server": self.name})
                if attempt < len(delays):
                    await asyncio.sleep(delays[attempt])
        if self.session is None:
            await self.set_status(
                ServerStatus.ERROR, "ERROR", error=f"Connection failed: {error}", attempts=attempt + 1
            )
            return False
        history = "RECONNECT" if reconnecting else "CONNECTED"
        await self.set_status(ServerStatus.CONNECTED, history)
        await self.discover()
        log.info("connected", extra={"server": self.name, "span": "proxy.connect", "status": "SUCCESS"})
        return True

    async def discover(self) -> int:
        """Run ``tools/list`` and publish the snapshot; returns its stream sequence."""
        assert self.session is not None
        tools = await self.session.list_tools()
        snapshot = tools_snapshot(self.server_id, self.name, tools, self._b.settings.max_tools_per_server)
        return await self._publish(snapshot)

    async def _tools_changed(self) -> None:
        self.tasks.spawn(self.discover())

    async def _lost(self, reason: str) -> None:
        if self.draining or self.status is ServerStatus.DISCONNECTED:
            return
        log.error("session lost: %s", reason, extra={"server": self.name})
        await self.set_status(ServerStatus.ERROR, "ERROR", error=f"Connection lost: {reason}")
        self.tasks.spawn(self.release())

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
