"""The health-worker: a scheduler (leading at most one at a time) and a checker (all of them).

Every health-worker consumes check commands from one shared durable consumer of the command
work queue, so each check runs on exactly one of them; the scheduler decides what to check.
"""

from __future__ import annotations

import asyncio
import logging
import secrets

import httpx2
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig
from pydantic import ValidationError

from toolmesh.contracts.commands import COMMANDS_STREAM, CheckServerHealth
from toolmesh.egress.http import EgressClients
from toolmesh.platform.bus.consuming import consume
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.topology import leases_bucket
from toolmesh.platform.runtime import Backends
from toolmesh.platform.supervision import TaskSet, supervise
from toolmesh_health.checker import Checker
from toolmesh_health.scheduler import Scheduler

log = logging.getLogger("toolmesh.health")
DURABLE = "health-workers"
FETCH_BATCH = 4
MAX_CONCURRENT_CHECKS = 64
HEALTH_POOL_LIMITS = httpx2.Limits(max_connections=MAX_CONCURRENT_CHECKS, keepalive_expiry=30.0)
"""One pool per egress policy (``EgressClients``), as many connections as checks run at once."""


class HealthWorker:
    """Schedules (when leading) and runs health checks until stopped."""

    def __init__(self, backends: Backends, *, identity: str | None = None) -> None:
        self._b = backends
        self.identity = identity or f"{backends.process_id}/health-{secrets.token_hex(3)}"
        self.scheduler: Scheduler | None = None
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_CHECKS)

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set."""
        settings = self._b.settings
        kv = await leases_bucket(self._b.js, settings.lease_ttl_seconds, replicas=settings.nats_replicas)
        scheduler = self.scheduler = Scheduler(settings, self._b.js, self._b.db, LeaseTable(kv, self.identity))
        async with EgressClients(HEALTH_POOL_LIMITS) as http:
            checker = Checker(self._b, http, self.identity)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(supervise("health-scheduler", lambda: scheduler.run(stop), stop))
                tg.create_task(supervise("health-checks", lambda: self._consume(checker, stop), stop))

    async def _consume(self, checker: Checker, stop: asyncio.Event) -> None:
        config = ConsumerConfig(
            durable_name=DURABLE,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=60,
            filter_subject=CheckServerHealth.subject,
        )
        checks = TaskSet("health-checks")

        async def start_check(msg: Msg) -> None:
            await self._slots.acquire()
            checks.spawn(self._check(checker, msg))

        try:
            await consume(
                self._b.js,
                CheckServerHealth.subject,
                stream=COMMANDS_STREAM,
                config=config,
                handle=start_check,
                stop=stop,
                batch=FETCH_BATCH,
            )
        finally:
            await checks.cancel_all()

    async def _check(self, checker: Checker, msg: Msg) -> None:
        try:
            command = CheckServerHealth.model_validate_json(msg.data)
            await checker.run(command)
        except ValidationError as exc:
            log.error("malformed health check command dropped: %s", exc)
        finally:
            self._slots.release()
            await msg.ack()
