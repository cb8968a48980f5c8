"""The health scheduler: one at a time (a lease), one check command per server per interval.

Intervals are numbered from the epoch (``window = now // interval``), so every health-worker
agrees on them. The leader publishes ``CheckServerHealth`` for each checked server at the start of
each window with ``Nats-Msg-Id`` ``health:<server>:<window>``: when a new leader takes over in a
window the old one already served, JetStream drops the duplicates. A leader that stops gives the
lease back at once; one that dies loses it when the lease TTL runs out (10 s, under the 30 s
interval), so the job moves within one interval either way.
"""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg
from nats.js import JetStreamContext

from toolmesh.contracts.commands import CheckServerHealth
from toolmesh.health import current_window
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.publishing import publish_command
from toolmesh.platform.config import Settings
from toolmesh.platform.supervision import wait_event
from toolmesh_health.monitoring import servers_to_check

log = logging.getLogger("toolmesh.health.scheduler")
SCHEDULER_LEASE = "health-scheduler"


def check_command(server_id: str, window: int, interval: float) -> CheckServerHealth:
    """The one check of ``server_id`` in ``window`` (its id makes a second copy a duplicate)."""
    return CheckServerHealth(
        command_id=f"health:{server_id}:{window}",
        server_id=server_id,
        window=window,
        deadline=(window + 1) * interval,
    )


class Scheduler:
    """Leads while it holds the ``health-scheduler`` lease."""

    def __init__(self, settings: Settings, js: JetStreamContext, db: asyncpg.Pool, leases: LeaseTable) -> None:
        self._settings = settings
        self._js = js
        self._db = db
        self._leases = leases
        self.windows_published = 0

    @property
    def leading(self) -> bool:
        """True while this process believes it holds the scheduler lease."""
        return SCHEDULER_LEASE in self._leases.held()

    async def run(self, stop: asyncio.Event) -> None:
        """Schedule while leading; try to lead otherwise; give the lease back on the way out."""
        last_window = -1
        try:
            while True:
                interval = self._settings.health_interval_seconds
                now = time.time()
                window = current_window(now, interval)
                if await self._lead() and window != last_window:
                    await self._publish_window(window, interval)
                    last_window = window
                pause = min((window + 1) * interval - now, self._settings.lease_renew_seconds)
                if await wait_event(stop, max(pause, 0.005)):
                    return
        finally:
            await self._leases.release(SCHEDULER_LEASE)

    async def _lead(self) -> bool:
        if self.leading:
            if await self._leases.renew(SCHEDULER_LEASE):
                return True
            log.warning("health scheduler lease lost", extra={"role": "health-worker"})
            return False
        if await self._leases.claim(SCHEDULER_LEASE):
            log.info("health scheduler lease taken by %s", self._leases.holder, extra={"role": "health-worker"})
            return True
        return False

    async def _publish_window(self, window: int, interval: float) -> None:
        server_ids = await servers_to_check(self._db)
        for server_id in server_ids:
            await publish_command(self._js, check_command(server_id, window, interval))
        self.windows_published += 1
        log.debug("window %d: %d checks scheduled", window, len(server_ids))
