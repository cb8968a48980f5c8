"""The session-worker: claims servers by lease, keeps their sessions, answers their requests.

Four loops run under supervision: the connect-command consumer, the lease renewer (a thread and
NATS connection of its own, ``renewer``), the lease watchdog and the reconciler, which re-claims
servers whose state wants a session but whose lease nobody holds (a worker died) or whose automatic
retry is due, so they come back without any request from a user, and removes the sandbox homes of
removed servers (``homes``; its first round runs at start).

A worker holds at most ``max_sessions_per_worker`` sessions: a full worker leaves a connect command to
the others, and when none took it the server goes to ERROR (``LIMIT_EXCEEDED``) with a retry scheduled.

Self-fencing: a lease not extended for ``safety_seconds`` (the TTL less one renew interval) may be
about to expire in the bucket, after which another worker can claim it. The watchdog then steps down
from that server by the local (monotonic) clock alone, without NATS: its requests are refused, its
session ends (a STDIO child's whole process group is killed) and the lease is forgotten. The owner's
request path checks the same age before it executes anything, so requests buffered while the
process was paused are refused even before the watchdog runs. Every reply carries the lease's
fencing token (``bus.fencing``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable
from datetime import UTC, datetime

from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig
from pydantic import ValidationError

from toolmesh.contracts.commands import COMMANDS_STREAM, RECONNECT_REASON, ConnectServer
from toolmesh.contracts.events import Event, ServerStatusChanged
from toolmesh.credentials import CredentialBox
from toolmesh.egress.http import EgressClients
from toolmesh.lifecycle import ServerStatus, wants_session
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.consuming import consume
from toolmesh.platform.bus.interface import Message, Subscription
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.bus.topology import leases_bucket
from toolmesh.platform.metrics import (
    record_lease_step_down,
    record_limit_rejection,
    record_reconcile_round,
    watch_lease_age,
)
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store import queries
from toolmesh.platform.supervision import TaskSet, supervise, wait_event
from toolmesh.sandbox import runner as sandbox
from toolmesh_session_worker.failures import next_retry
from toolmesh_session_worker.homes import HomeSweeper
from toolmesh_session_worker.inflight import Inflight
from toolmesh_session_worker.owned import OwnedServer
from toolmesh_session_worker.renewer import LeaseRenewer
from toolmesh_session_worker.requests import owner_dispatcher
from toolmesh_session_worker.upstream.transports import SHARED_POOL_LIMITS

log = logging.getLogger("toolmesh.session_worker")
DURABLE = "session-workers"
FULL_DELIVERIES = 3
"""Deliveries of a connect command that found its worker full before the server is put in ERROR."""
FULL_REDELIVERY_SECONDS = 1.0


class SessionWorker:
    """Owner of upstream sessions for the servers whose leases it holds."""

    def __init__(self, backends: Backends, box: CredentialBox) -> None:
        self._b = backends
        self._box = box
        self._owned: dict[str, OwnedServer] = {}
        self._subs: dict[str, Subscription] = {}
        self._connects = TaskSet("connect")
        # The requests being answered belong to the worker, not to their server's tasks: letting a
        # server go (its connect failed, its lease was lost) must not cancel an answer half-way and
        # leave its requester waiting out its timeout (a remove answered SESSION_NOT_FOUND).
        self._answers = TaskSet("answers")
        self._inflight = Inflight(backends.settings, backends.context.loop_lag)  # bounds the requests answered at once
        self._taking: set[str] = set()
        self._leases: LeaseTable | None = None
        self.renewer: LeaseRenewer | None = None
        settings = backends.settings
        self.safety_seconds = settings.lease_ttl_seconds - settings.lease_renew_seconds
        """Age past which a lease is no longer trusted: the worker steps down from its server."""
        self._http: EgressClients | None = None
        self._homes = HomeSweeper(backends.db, backends.settings.data_dir)

    @property
    def owned(self) -> dict[str, OwnedServer]:
        """Servers this worker holds now, by id."""
        return self._owned

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then close every session and give every lease back."""
        log.info("%s", (await asyncio.to_thread(sandbox.mode, self._b.settings)).describe())
        settings = self._b.settings
        kv = await leases_bucket(self._b.js, settings.lease_ttl_seconds, replicas=settings.nats_replicas)
        ttl = (await kv.status()).ttl or settings.lease_ttl_seconds
        if ttl < settings.lease_ttl_seconds:  # a bucket made earlier keeps its TTL: fence by the shorter one
            log.warning(
                "the leases bucket expires leases after %gs, not lease_ttl_seconds (%gs)",
                ttl,
                settings.lease_ttl_seconds,
            )
            self.safety_seconds = ttl - settings.lease_renew_seconds
        self._leases = LeaseTable(kv, self._b.process_id)
        self.renewer = LeaseRenewer(self._leases, settings, self._lost, lambda: self._b.bus.is_connected)
        unwatch = watch_lease_age(self._leases.oldest_age)
        # One connection pool per egress policy for every HTTP upstream session: a client of its own
        # per session would cost each one ~800 KB (its TLS context and pool).
        async with EgressClients(SHARED_POOL_LIMITS) as self._http:
            try:
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(supervise("connect-commands", lambda: self._consume_commands(stop), stop))
                    tg.create_task(supervise("lease-renewer", lambda: self._run_renewer(stop), stop))
                    tg.create_task(supervise("lease-watchdog", lambda: self._watch_leases(stop), stop))
                    tg.create_task(supervise("reconciler", lambda: self._reconcile(stop), stop))
            finally:
                await self._connects.cancel_all()
                await asyncio.gather(*(self._forget(s, close=True) for s in list(self._owned.values())))
                await self._answers.finish(self._b.settings.drain_timeout_seconds)  # their sessions are closed
                unwatch()

    async def _publish(self, event: Event) -> int:
        return await publish_event(self._b.js, event)

    async def _consume_commands(self, stop: asyncio.Event) -> None:
        config = ConsumerConfig(durable_name=DURABLE, ack_policy=AckPolicy.EXPLICIT, ack_wait=30)
        await consume(
            self._b.js,
            ConnectServer.subject,
            stream=COMMANDS_STREAM,
            config=config,
            handle=self._on_connect,
            stop=stop,
            batch=10,
        )

    async def _on_connect(self, msg: Msg) -> None:
        try:
            command = ConnectServer.model_validate_json(msg.data)
        except ValidationError as exc:
            log.error("malformed connect command dropped: %s", exc)
            await msg.term()
            return
        if self._full() and command.server_id not in self._owned:
            record_limit_rejection("sessions")
            if msg.metadata.num_delivered < FULL_DELIVERIES:
                await msg.nak(delay=FULL_REDELIVERY_SECONDS)  # a worker with room may take it
                return
            await self._no_room_for(command.server_id)
        else:
            await self.take(command.server_id, reconnect=command.reason == RECONNECT_REASON)
        await msg.ack()

    def _full(self) -> bool:
        """Whether this worker holds (or is taking) its maximum of sessions."""
        return len(self._owned) + len(self._taking) >= self._b.settings.max_sessions_per_worker

    async def _no_room_for(self, server_id: str) -> None:
        """ERROR with ``LIMIT_EXCEEDED`` for a server no worker took; retried when the backoff says."""
        assert self._leases is not None
        row = await queries.get_server(self._b.db, server_id)
        if row is None or row["status"] != ServerStatus.CONNECTING or await self._leases.holder_of(server_id):
            return
        settings = self._b.settings
        limit = settings.max_sessions_per_worker
        retry = row["auto_retries"] + 1
        delay, retry_at = next_retry(retry, settings.error_retry_seconds)
        log.warning("no session-worker has room for %s; again in %.0fs", row["name"], delay)
        await self._publish(
            ServerStatusChanged(
                server_id=server_id,
                namespace=row["namespace"],
                status=ServerStatus.ERROR,
                previous_status=ServerStatus.CONNECTING,
                error_message=f"LIMIT_EXCEEDED: the session-workers hold their maximum of {limit} sessions each",
                history="ERROR",
                details={"worker": self._b.process_id, "error_kind": "limit", "auto_retry": retry},
                retry_at=retry_at,
            )
        )

    async def take(self, server_id: str, *, reconnect: bool = False) -> bool:
        """Claim a server if nobody holds it and its state wants a session; then connect it.

        ``reconnect``: the health-worker asked (no owner was left) — connect with the EC-001 backoff.
        """
        if server_id in self._owned or server_id in self._taking:
            return True
        self._taking.add(server_id)  # the command consumer and the reconciler may race here
        try:
            return await self._take(server_id, reconnect)
        finally:
            self._taking.discard(server_id)

    async def _take(self, server_id: str, reconnect: bool) -> bool:
        assert self._leases is not None
        row = await queries.get_server(self._b.db, server_id)
        if row is None or not wants_session(ServerStatus(row["status"]), row["retry_at"], datetime.now(UTC)):
            return False
        if not await self._leases.claim(server_id):
            return False
        server = OwnedServer(self._b, row, self._box, self._publish, self._http)
        server.on_released = self._released
        server.lease_valid = functools.partial(self._lease_valid, server_id)
        server.fence_token = self._leases.token(server_id)
        settings = self._b.settings
        dispatcher = owner_dispatcher(
            server, drain_timeout=settings.drain_timeout_seconds, hold_seconds=settings.reconnect_hold_seconds
        )
        attributes = {"toolmesh.server": server.name}

        async def on_request(msg: Message) -> None:
            self._answers.spawn(self._inflight.answer(dispatcher, server_id, msg, attributes))

        try:  # owned: a gateway in this process hands its requests over without NATS
            self._subs[server_id] = await self._b.bus.subscribe(verbs.RPC.wildcard(server_id), on_request, owned=True)
        except BaseException:
            await self._leases.release(server_id)
            raise
        self._owned[server_id] = server
        self._connects.spawn(self._connect(server, reconnect))
        return True

    async def _connect(self, server: OwnedServer, reconnect: bool = False) -> None:
        """Connect a claimed server; when that fails, or breaks on NATS or Postgres, give it back (the
        reconciler claims it again while its state wants a session)."""
        try:
            connected = await server.connect(reconnect=reconnect)
            if not connected:
                await server.projected()  # the ERROR (and its retry time) is what the reconciler reads next
        except Exception:
            log.exception("connecting broke; giving the server back", extra={"server": server.name})
            connected = False
        if not connected:
            await self._forget(server, close=True)

    async def _released(self, server: OwnedServer) -> None:
        await self._forget(server, close=False)

    async def _forget(self, server: OwnedServer, *, close: bool) -> None:
        """Stop serving a server: unsubscribe, close the session if asked, give the lease back."""
        assert self._leases is not None
        if self._owned.get(server.server_id) is not server:
            return
        del self._owned[server.server_id]
        sub = self._subs.pop(server.server_id, None)
        if sub is not None:
            await sub.unsubscribe()
        if close:
            await server.close()
            await server.tasks.cancel_all()
        await self._leases.release(server.server_id)

    async def _run_renewer(self, stop: asyncio.Event) -> None:
        assert self.renewer is not None
        await self.renewer.run(stop)

    def _lost(self, server_id: str) -> None:
        """The renewer found a lease expired or taken (on this loop): close that server's session."""
        assert self._leases is not None
        server = self._owned.get(server_id)
        if server is not None and self._leases.token(server_id) is None:  # not claimed again meanwhile
            log.error("lease lost; closing the local session", extra={"server_id": server_id})
            self._connects.spawn(self._forget(server, close=True))

    def _lease_valid(self, server_id: str) -> bool:
        """Whether the lease of ``server_id`` is held and younger than the safety point."""
        assert self._leases is not None
        age = self._leases.age(server_id)
        return age is not None and age <= self.safety_seconds

    async def _watch_leases(self, stop: asyncio.Event) -> None:
        """Step down from every server whose lease passed the safety point (no NATS needed)."""
        assert self._leases is not None
        interval = self._b.settings.lease_renew_seconds / 4
        while not await wait_event(stop, interval):
            stale: list[Awaitable[None]] = []
            for server_id in self._leases.older_than(self.safety_seconds):
                age = self._leases.age(server_id) or 0.0
                revision = self._leases.forget(server_id)  # the renewer no longer extends it
                server = self._owned.get(server_id)
                log.error(
                    "lease not renewed for %.1fs (safety point %.1fs); stepping down",
                    age,
                    self.safety_seconds,
                    extra={"server_id": server_id, "server": server.name if server else None},
                )
                record_lease_step_down()
                if server is not None:
                    stale.append(self._step_down(server, revision))
            await asyncio.gather(*stale)

    async def _step_down(self, server: OwnedServer, revision: int | None) -> None:
        """Stop serving ``server`` without NATS (session closed, STDIO child killed); then, best effort
        and bounded, unsubscribe and give the lease back if the bucket still has our revision."""
        assert self._leases is not None
        if self._owned.get(server.server_id) is not server:
            return
        del self._owned[server.server_id]
        sub = self._subs.pop(server.server_id, None)
        await server.close()
        await server.tasks.cancel_all()
        try:
            async with asyncio.timeout(self._b.settings.lease_renew_seconds):
                if sub is not None:
                    await sub.unsubscribe()
                if revision is not None:
                    await self._leases.give_back(server.server_id, revision)
        except Exception as exc:  # NATS unreachable: the lease expires in the bucket by itself
            log.warning("could not give the lease back: %s", exc or type(exc).__name__, extra={"server": server.name})

    async def _reconcile(self, stop: asyncio.Event) -> None:
        assert self._leases is not None
        while True:
            for row in await queries.servers_wanting_sessions(self._b.db):
                if self._full():
                    break
                if row["id"] not in self._owned and await self._leases.holder_of(row["id"]) is None:
                    if await self.take(row["id"]):
                        log.info("claimed orphaned server", extra={"server": row["name"]})
            await self._homes.sweep(self._owned.keys() | self._taking)
            record_reconcile_round()
            if await wait_event(stop, self._b.settings.reconcile_interval_seconds):
                return
