"""The upstream sessions of a server registered with ``auth.identity: per_user``: one per principal
that calls it, opened on its first request with that principal's own grant (so the upstream sees its
own user), and closed once it has been idle for ``idle_seconds``. At most ``limit`` are open: a new
one closes the least recently used one with nothing in flight and no subscription, and is refused
(``LimitExceeded``) when every one is busy.

Each principal's session has a client side of its own (``UpstreamClients``): what its upstream sends
to a client (sampling, elicitation, roots, log messages, resource updates) is attributed only among
that principal's requests, subscriptions and log levels, never to another principal's client.

A principal without a grant gets ``UpstreamAuthorizationRequired`` (the gateway adds the URL to
authorize at); so does one whose grant the upstream refuses even after a refresh.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from toolmesh.errors import LimitExceeded, ServerUnavailable, UpstreamAuthorizationRequired
from toolmesh.platform.metrics import record_user_sessions
from toolmesh.platform.supervision import TaskSet
from toolmesh_session_worker.clients import UpstreamClients
from toolmesh_session_worker.failures import error_kind
from toolmesh_session_worker.upstream import LostCallback, Upstream, UpstreamError
from toolmesh_session_worker.upstream_grants import AuthorizationNeeded, GrantKeeper

log = logging.getLogger("toolmesh.session")
Opener = Callable[[GrantKeeper, LostCallback, UpstreamClients], Awaitable[Upstream]]
"""Opens an upstream session that authenticates with the keeper's grant, reports its loss and sends
its server → client traffic to the given client side."""
Grants = Callable[[str], Awaitable[GrantKeeper]]
"""The loaded grant keeper of a principal (``AuthorizationNeeded`` when it has none)."""


@dataclass
class UserSession:
    """One principal's upstream session and the client side that serves only that principal's clients."""

    session: Upstream
    clients: UpstreamClients
    used: float


@dataclass
class PrincipalSessions:
    """The per-principal sessions of one server."""

    server_id: str
    server_name: str
    open_session: Opener
    grants: Grants
    idle_seconds: float
    tasks: TaskSet
    new_clients: Callable[[], UpstreamClients]
    limit: int = 100
    clock: Callable[[], float] = time.monotonic
    _held: dict[str, UserSession] = field(default_factory=dict)
    _opening: dict[str, asyncio.Lock] = field(default_factory=dict)
    _reaping: bool = False

    @property
    def pending(self) -> int:
        """Requests in flight on every principal's session."""
        return sum(held.session.pending for held in self._held.values())

    def __len__(self) -> int:
        return len(self._held)

    def held(self, principal: str | None) -> UserSession | None:
        """The session ``principal`` holds now (open or not), if any."""
        return self._held.get(principal) if principal else None

    def every_session(self) -> list[tuple[Upstream, UpstreamClients]]:
        """Every principal's session and its client side."""
        return [(held.session, held.clients) for held in self._held.values()]

    async def session(self, principal: str | None) -> UserSession:
        """The session of ``principal``, opened now when it has none.

        Raises:
            UpstreamAuthorizationRequired: the principal has no usable grant.
            ServerUnavailable: the upstream could not be reached.
        """
        if not principal:
            raise self.required("the request names no principal")
        live = self._live(principal)
        if live is not None:
            return live
        lock = self._opening.setdefault(principal, asyncio.Lock())
        async with lock:
            live = self._live(principal)
            if live is not None:
                return live
            await self.close(principal)  # a session that died
            await self._make_room()
            held = await self._open(principal)
            self._held[principal] = held
        if not self._reaping:
            self._reaping = True
            self.tasks.spawn(self._reap())
        return held

    async def _make_room(self) -> None:
        """Close the least recently used idle session when ``limit`` are open; ``LimitExceeded`` when
        every open one is busy."""
        if len(self._held) < self.limit:
            return
        idle = [(held.used, p) for p, held in self._held.items() if self._closable(held)]
        if not idle:
            raise LimitExceeded(
                f"{self.server_name} holds {len(self._held)} users' sessions, every one busy; try again shortly",
                {"server_id": self.server_id, "limit": self.limit},
            )
        await self.close(min(idle)[1])

    @staticmethod
    def _closable(held: UserSession) -> bool:
        return not held.session.pending and not held.clients.subscriptions

    def _live(self, principal: str) -> UserSession | None:
        held = self._held.get(principal)
        if held is None or not held.session.alive:
            return None
        held.used = self.clock()
        return held

    async def _open(self, principal: str) -> UserSession:
        try:
            keeper = await self.grants(principal)
        except AuthorizationNeeded:
            raise self.required("you have not authorized it yet") from None

        clients = self.new_clients()

        async def lost(reason: str) -> None:
            log.info("a user's session ended: %s", reason, extra={"server": self.server_name})
            self.tasks.spawn(self._close_lost(principal, clients))

        try:
            session = await self.open_session(keeper, lost, clients)
        except UpstreamError as exc:
            if error_kind(exc) == "auth":
                raise self.required("the upstream refused your grant") from None
            raise ServerUnavailable(
                f"Server unavailable: {self.server_name}: could not open your session: {exc.summary}",
                {"server_id": self.server_id},
            ) from None
        log.info("opened a user's session", extra={"server": self.server_name, "sessions": len(self._held) + 1})
        record_user_sessions("opened")
        return UserSession(session, clients, self.clock())

    def required(self, why: str) -> UpstreamAuthorizationRequired:
        """The error that asks the caller to authorize its own account (``why``: what it lacks)."""
        return UpstreamAuthorizationRequired(
            f"{self.server_name} acts as each user's own account upstream and {why}: authorize with "
            f"POST /api/v1/aggregator/servers/{self.server_id}/authorize",
            {"server_id": self.server_id, "server": self.server_name},
        )

    async def close(self, principal: str) -> None:
        """Close the session of ``principal``, if it has one."""
        held = self._held.pop(principal, None)
        if held is not None:
            record_user_sessions("closed")
            await held.session.close()

    async def _close_lost(self, principal: str, clients: UpstreamClients) -> None:
        """Close the session of ``principal`` that was lost (known by its client side), not one a
        request opened in its place meanwhile."""
        held = self._held.get(principal)
        if held is not None and held.clients is clients:
            await self.close(principal)

    async def close_all(self) -> None:
        """Close every principal's session."""
        held, self._held = list(self._held.values()), {}
        record_user_sessions("closed", len(held))
        for one in held:
            await one.session.close()

    async def close_idle(self) -> int:
        """Close the sessions unused for ``idle_seconds`` with nothing in flight and no resource
        subscription of their clients; how many."""
        cutoff = self.clock() - self.idle_seconds
        idle = [p for p, held in self._held.items() if held.used <= cutoff and self._closable(held)]
        for principal in idle:
            await self.close(principal)
            self._opening.pop(principal, None)
        return len(idle)

    async def _reap(self) -> None:
        """While sessions are open, close the idle ones every quarter of ``idle_seconds``."""
        try:
            while self._held:
                await asyncio.sleep(max(self.idle_seconds / 4, 0.05))
                if closed := await self.close_idle():
                    log.info("closed %d idle user sessions", closed, extra={"server": self.server_name})
        finally:
            self._reaping = False
