"""One server whose lease this worker holds: its upstream session, status and pending calls."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import mcp_types

from toolmesh.contracts.events import Event, ServerStatusChanged
from toolmesh.contracts.rpc import HealthVerdictResult, HealthVerdictRpc
from toolmesh.credentials import CredentialBox, expand_env, secret_values
from toolmesh.egress.http import EgressClients
from toolmesh.egress.policy import EgressPolicy
from toolmesh.errors import LimitExceeded
from toolmesh.health import reconnect_delays
from toolmesh.lifecycle import ServerStatus, can_transition
from toolmesh.platform.bus.interface import Bus
from toolmesh.platform.polling import poll_until
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store.consistency import wait_for_projection
from toolmesh.platform.store.queries import Row
from toolmesh.platform.supervision import TaskSet, wait_event
from toolmesh.redaction import process_redactor
from toolmesh.registration_policy import worker_environment
from toolmesh.sandbox.runner import Sandboxer
from toolmesh.storable import storable
from toolmesh_session_worker.clients import UpstreamClients
from toolmesh_session_worker.failures import NOT_RETRIED, Attempts, error_kind, next_retry, open_with_retries
from toolmesh_session_worker.offerings import Offerings
from toolmesh_session_worker.principal_sessions import PrincipalSessions
from toolmesh_session_worker.rediscovery import Rediscoveries
from toolmesh_session_worker.status_events import status_event
from toolmesh_session_worker.upstream import (
    LostCallback,
    OpeningOptions,
    RestPolicy,
    Upstream,
    UpstreamError,
    open_session,
)
from toolmesh_session_worker.upstream.bearer import BearerAuth
from toolmesh_session_worker.upstream.stdio import base_environment
from toolmesh_session_worker.upstream_grants import (
    AuthorizationNeeded,
    DiscoveryGrant,
    GrantKeeper,
    GrantStore,
    StoredGrant,
    TriedGrant,
    authorized_since,
    identity,
    loaded_grants,
    needs_authorization,
)

log = logging.getLogger("toolmesh.session")
HELD_VERBS = frozenset({"call", "refresh", "request", "subscribe", "set_level"})
"""Requests that wait for a reconnect in progress instead of failing at once (EC-010)."""
Publish = Callable[[Event], Awaitable[int]]


class OwnedServer:
    """The live side of one server: connect with retries, discover, and close."""

    def __init__(
        self, backends: Backends, row: Row, box: CredentialBox, publish: Publish, http: EgressClients | None = None
    ) -> None:
        self.server_id: str = row["id"]
        self.name: str = row["name"]
        self.namespace: str = row["namespace"]
        self.status = ServerStatus(row["status"])
        self.agent: str | None = row["created_by"]  # the principal that registered it
        self.tool_count = 0  # tools of the last list
        self._auto_retries: int = row["auto_retries"]  # automatic retries since last CONNECTED (BR-002)
        self._transport: str = row["transport_type"]
        self._sealed: str = row["connection_config"]["sealed"]
        self._b = backends
        self._box = box
        self._publish = publish
        self._http = http  # the worker's shared pools for HTTP upstreams (None: each session pools its own)
        # Where its URLs may go: loopback and private addresses only if an owner or admin registered it.
        self.egress = EgressPolicy.of(
            bool(row["connection_config"].get("private_network")), backends.settings.upstream_private_networks
        )
        self.session: Upstream | None = None
        self.draining = False
        self.tasks = TaskSet(f"server {self.name}")
        self._rediscoveries = Rediscoveries(self.name, self.tasks)
        self.offerings = Offerings(backends, self.server_id, self.name, self.namespace, publish)
        self.calls: dict[str, asyncio.Task[object]] = {}  # tool calls in flight by call id (for cancel)
        self.clients = UpstreamClients(
            backends.bus, self.server_id, self.name, backends.settings.request_timeout_seconds
        )
        self.on_released: Callable[[OwnedServer], Awaitable[None]] | None = None
        self.lease_valid: Callable[[], bool] = lambda: True  # the worker's lease is fresh (self-fencing)
        self.fence_token: int | None = None  # the lease's fencing token, stamped on every reply
        self.reconnecting = False  # a health-driven reconnect is in progress (EC-010)
        self._settled = asyncio.Event()  # set whenever no reconnect is in progress
        self._status_seq = 0  # stream sequence of the last status this owner published
        self._settled.set()
        self._grant_tried: TriedGrant | None = None  # OAuth: the grant the last connect used (None: not OAuth)
        self._grant_store: GrantStore = StoredGrant(backends.db, box, self.server_id)
        self.principals: PrincipalSessions | None = None  # auth.identity per_user: each caller's own session

    @property
    def bus(self) -> Bus:
        """The bus this server's requests arrive on."""
        return self._b.bus

    @property
    def pending(self) -> int:
        """Calls in flight upstream (on the server's own session and on its users' own sessions)."""
        own = self.session.pending if self.session else 0
        return own + (self.principals.pending if self.principals is not None else 0)

    async def set_status(
        self,
        status: ServerStatus,
        history: str,
        *,
        error: str | None = None,
        retry_at: datetime | None = None,
        **details: Any,
    ) -> int:
        """Publish a status change (or a reconnect, keeping the status); returns its stream sequence."""
        previous = self.status
        if status != previous and not can_transition(previous, status):
            log.warning("ignoring %s -> %s", previous, status, extra={"server": self.name})
            return 0
        self.status = status
        if status is ServerStatus.CONNECTED:
            self._auto_retries = 0
        seq = await self._publish(
            ServerStatusChanged(
                server_id=self.server_id,
                namespace=self.namespace,
                status=status,
                previous_status=previous,
                error_message=storable(error),  # upstream text: no NUL into the projection
                history=history,
                details={"worker": self._b.process_id, **details},
                retry_at=retry_at,
            )
        )
        self._status_seq = seq
        domain = status_event(self, self._transport, previous, status, history, storable(error))
        if domain is not None:
            await self._publish(domain)
        return seq

    async def connect(self, *, reconnect: bool = False) -> bool:
        """Open the session (retrying with backoff, BR-002), list its tools, go CONNECTED and publish
        what it offers; False when it failed (ERROR: a tool list that cannot be read leaves no session
        and no partial tool list behind).

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
        tried = await self._open(delays)
        if self.session is None:
            await self.failed(f"Connection failed: {tried.error}", tried.kind, attempts=tried.count)
            return False
        tools = await self._first_tools()
        if tools is None:
            return False
        try:  # lists first: whoever sees CONNECTED can use the server's tools at once
            await self.discover_all(tools)
        except (UpstreamError, LimitExceeded) as exc:
            log.warning("discovery failed: %s", exc, extra={"server": self.name})
            await self.close()
            if isinstance(exc, LimitExceeded):
                await self.failed(f"Discovery failed: {exc}", "limit", attempts=tried.count)
            else:
                await self.failed(f"Discovery failed: {exc.summary}", error_kind(exc), attempts=tried.count)
            return False
        history = "RECONNECT" if reconnecting or reconnect else "CONNECTED"
        await self.set_status(ServerStatus.CONNECTED, history)
        log.info("connected", extra={"server": self.name, "span": "proxy.connect", "status": "SUCCESS"})
        return True

    async def _first_tools(self) -> list[mcp_types.Tool] | None:
        """The tool list of a session just opened; on failure the session is closed, the server is in
        ERROR with the reason, and the answer is None."""
        assert self.session is not None
        try:
            tools = await self.session.list_tools()
        except UpstreamError as exc:
            log.warning("tool discovery failed: %s", exc, extra={"server": self.name})
            await self.close()
            await self.failed(f"Tool discovery failed: {exc.summary}", error_kind(exc))
            return None
        self.tool_count = len(tools)
        return tools

    async def failed(self, error: str, kind: str, **details: Any) -> None:
        """ERROR after connecting failed, with an automatic retry when ``kind`` allows one (see
        ``failures``); refused credentials are also a security warning."""
        if kind in NOT_RETRIED:
            if kind == "auth" and self._grant_tried is None:  # an OAuth server says it needs authorization
                log.warning(
                    "security: the upstream refused toolmesh's credentials; no automatic retry: %s",
                    error,
                    extra={"server": self.name, "server_id": self.server_id, "security": True},
                )
            await self.set_status(ServerStatus.ERROR, "ERROR", error=error, error_kind=kind, **details)
            if kind == "auth" and await authorized_since(self._grant_tried, self._grant_store):
                await self.set_status(ServerStatus.CONNECTING, "CONNECT_REQUESTED", reason="authorized")
            return
        self._auto_retries += 1
        delay, retry_at = next_retry(self._auto_retries, self._b.settings.error_retry_seconds)
        log.info(
            "connecting again in %.0fs (automatic retry %d)", delay, self._auto_retries, extra={"server": self.name}
        )
        await self.set_status(
            ServerStatus.ERROR,
            "ERROR",
            error=error,
            retry_at=retry_at,
            error_kind=kind,
            auto_retry=self._auto_retries,
            **details,
        )

    async def _open(self, delays: list[float]) -> Attempts:
        """Try to open the session, pausing ``delays[i]`` after failed attempt ``i``; refused
        credentials end the attempts at once."""
        config = self._config()
        oauth = identity(config)
        per_user = oauth == "per_user"
        grants = None
        if oauth is not None:
            if per_user:
                self._grant_store = DiscoveryGrant(self._b.db, self._box, self.server_id)
                self.principals = self.principals or self._principal_sessions()
            try:
                grants = await loaded_grants(self._grant_store, self.egress, self.server_id, per_user)
            except AuthorizationNeeded as exc:
                self._grant_tried = TriedGrant(None)
                return Attempts(1, exc.summary, "auth")
        self._grant_tried = TriedGrant(grants.current) if grants is not None else None

        options = self._options(grants, self._lost, own=True)

        async def open_once() -> Upstream:
            return await open_session(self.name, self._transport, config, options)

        opened, tried = await open_with_retries(open_once, delays, self.name)
        if opened is not None:
            self.session = opened
        if grants is not None and tried.kind == "auth":  # refused even after a refresh
            self._grant_tried = TriedGrant(grants.current)
            return Attempts(tried.count, needs_authorization(self.server_id, per_user), "auth")
        return tried

    def _config(self) -> dict[str, Any]:
        """The server's config, opened and ``${VAR}``-expanded; its secrets known to the log redactor."""
        environ = worker_environment(os.environ, self._b.settings, self.namespace)
        config = expand_env(self._box.open(self._sealed), environ)
        process_redactor().add(secret_values(config))
        return config

    def _options(
        self, grants: GrantKeeper | None, on_lost: LostCallback, *, own: bool, clients: UpstreamClients | None = None
    ) -> OpeningOptions:
        """How a session of this server opens: the server's ``own`` (it discovers what the upstream
        offers), or one of its users' (it only answers that user's requests, and its server → client
        traffic goes only to that user's clients, ``clients``)."""
        settings = self._b.settings
        return OpeningOptions(
            connect_timeout=settings.connection_timeout_seconds,
            on_tools_changed=self._tools_changed if own else None,
            on_list_changed=self._lists_changed if own else None,
            on_lost=on_lost,
            stdio_base_env=base_environment(settings.stdio_base_env, os.environ),
            stdio_sandbox=Sandboxer(settings, str(self.server_id)),
            http_client=self._http.client(self.egress) if self._http is not None else None,
            egress=self.egress,
            auth=BearerAuth(grants) if grants is not None else None,
            client_side=clients if clients is not None else self.clients,
            rest_policy=RestPolicy(
                settings.rest_retry_attempts, settings.rest_retry_backoff_seconds, settings.rest_timeout_seconds
            ),
        )

    def _principal_sessions(self) -> PrincipalSessions:
        async def grants(principal: str) -> GrantKeeper:
            store = StoredGrant(self._b.db, self._box, self.server_id, principal)
            return await loaded_grants(store, self.egress, self.server_id, per_user=True)

        async def open_for(grants: GrantKeeper, on_lost: LostCallback, clients: UpstreamClients) -> Upstream:
            options = self._options(grants, on_lost, own=False, clients=clients)
            return await open_session(self.name, self._transport, self._config(), options)

        def new_clients() -> UpstreamClients:
            return UpstreamClients(self._b.bus, self.server_id, self.name, self._b.settings.request_timeout_seconds)

        return PrincipalSessions(
            self.server_id,
            self.name,
            open_for,
            grants,
            self._b.settings.upstream_user_session_idle_seconds,
            self.tasks,
            new_clients,
            limit=self._b.settings.upstream_user_sessions_per_server,
        )

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
            tried = await self._open(delays)
            if self.session is None:
                error = f"Reconnect failed after {tried.count} attempts: {tried.error}"
                await self.failed(error, tried.kind, attempts=tried.count)
                self.tasks.spawn(self.release())
                return
            tools = await self._first_tools()
            if tools is None:
                self.tasks.spawn(self.release())
                return
            await self.set_status(ServerStatus.CONNECTED, "RECONNECT", attempts=tried.count)
            log.info("reconnected", extra={"server": self.name, "span": "proxy.reconnect", "status": "SUCCESS"})
        finally:
            self.reconnecting = False
            self._settled.set()
        try:
            await self.discover_all(tools)
            if self.session is not None:
                await self.clients.restore(self.session)
        except (UpstreamError, LimitExceeded) as exc:
            log.warning("discovery after reconnect failed: %s", exc, extra={"server": self.name})

    async def hold_while_reconnecting(self, timeout: float) -> None:
        """EC-010: a request arriving during a reconnect waits (up to ``timeout``) for it to settle."""
        if self.reconnecting:
            if not await wait_event(self._settled, timeout):
                log.info("request still waiting for reconnect after %.1fs", timeout, extra={"server": self.name})

    def _live(self) -> Upstream:
        assert self.session is not None
        return self.session

    async def discover(self, tools: list[mcp_types.Tool] | None = None) -> int:
        """Run ``tools/list`` (unless ``tools`` were just listed) and publish what changed (see
        ``Offerings.tools``); returns the snapshot's stream sequence."""
        seq, self.tool_count, new = await self.offerings.tools(self._live(), tools)
        await self.offerings.announce(new)
        return seq

    async def discover_all(self, tools: list[mcp_types.Tool] | None = None) -> int:
        """Publish everything the upstream offers (``tools`` when just listed); returns the last sequence."""
        seq, self.tool_count = await self.offerings.everything(self._live(), tools)
        return seq

    async def discover_resources(self) -> int:
        """Publish the upstream's resources and templates."""
        return await self.offerings.resources(self._live())

    async def discover_prompts(self) -> int:
        """Publish the upstream's prompts."""
        return await self.offerings.prompts(self._live())

    async def _tools_changed(self) -> None:
        self._rediscoveries.changed("tools", self.discover)

    async def _lists_changed(self, kind: str) -> None:
        discover = self.discover_resources if kind == "resources" else self.discover_prompts
        self._rediscoveries.changed(kind, discover)

    async def _lost(self, reason: str) -> None:
        if self.draining or self.reconnecting or self.status is ServerStatus.DISCONNECTED:
            return
        log.error("session lost: %s", reason, extra={"server": self.name})
        # EC-003: calls in flight already answered 503; the reconnection is scheduled here.
        await self._error_then_reconnect("ERROR", f"Connection lost: {reason}", source="session_lost")

    async def drain(self, timeout: float) -> None:
        """Wait until calls in flight finish (or ``timeout`` passes)."""
        # The SDK exposes no "idle" signal for a session, so poll the in-flight count.
        await poll_until(lambda: not self.pending, timeout)

    async def close(self) -> None:
        """Close the upstream session (STDIO: its whole process group is killed) and its users' own."""
        session, self.session = self.session, None
        if session is not None:
            await session.close()
        if self.principals is not None:
            await self.principals.close_all()

    async def release(self) -> None:
        """Close and hand the lease back (the worker forgets this server) once the read model shows the
        last status this owner published (``projected``)."""
        await self.close()
        await self.projected()
        if self.on_released is not None:
            await self.on_released(self)

    async def projected(self) -> None:
        """Wait (bounded) until the read model shows the last status this owner published. Before a
        lease goes back: a reconciler reading an older status from a projection that lags would take
        the server back too early (undo a disconnect, or retry a failed connect at once with the
        retry count of before the failure)."""
        await wait_for_projection(self._b.db, self._status_seq, self._b.settings.projection_wait_seconds)
