"""The lease renewer: every held lease renewed each ``lease_renew_seconds``, from a thread and a NATS
connection of its own.

Renewals must not wait behind the worker's call traffic: not behind a busy event loop (results
encoded, hundreds of replies dispatched) nor behind megabytes of replies queued on the shared
connection. So the renewer runs its own event loop in a thread, over its own connection, and renews
every lease of a round concurrently (one renewal per lease in flight at a time; a slow one does not
hold the next round up). It renews only while ``serving()`` (the worker's own connection, on which
its requests arrive, is up): a worker cut off from its requests lets its leases age, and steps
down, as it did when the renewals went over that connection. A lease found lost (expired, or taken
by another worker) is handed to the worker's loop through ``on_lost``. Each renewal's round trip is
recorded by outcome (``mcp_aggregator_lease_renewal_duration_seconds``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from nats.aio.client import Client as NATS
from nats.js.kv import KeyValue

from toolmesh.platform.bus.connection import connect_nats, nats_options
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.topology import LEASES_BUCKET
from toolmesh.platform.config import Settings
from toolmesh.platform.metrics import record_lease_renewal
from toolmesh.platform.supervision import wait_event

log = logging.getLogger("toolmesh.session_worker.leases")
THREAD_CHECK_SECONDS = 1.0
"""How often the worker's loop checks that the renewer's thread still runs."""


class LeaseRenewer:
    """Renews the leases of ``leases`` from its own thread; ``on_lost(key)`` runs on the caller's loop."""

    def __init__(
        self,
        leases: LeaseTable,
        settings: Settings,
        on_lost: Callable[[str], None],
        serving: Callable[[], bool] = lambda: True,
    ) -> None:
        self._leases = leases
        self._settings = settings
        self._on_lost = on_lost
        self._serving = serving
        self._started = threading.Event()
        self._in_flight: set[str] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        """The renewer's own event loop, while its thread runs."""
        self.nc: NATS | None = None
        """The renewer's own NATS connection, while it is open."""
        self._stop: asyncio.Event | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Run the renewer's thread until ``stop`` is set; raise when the thread ended by itself."""
        caller = asyncio.get_running_loop()
        self._started.clear()
        thread = threading.Thread(target=self._thread, args=(caller,), name="lease-renewer", daemon=True)
        thread.start()
        try:
            while not await wait_event(stop, THREAD_CHECK_SECONDS):
                if not thread.is_alive():
                    raise RuntimeError("the lease renewer's thread ended")
        finally:
            await asyncio.to_thread(self._started.wait)
            if self.loop is not None and self._stop is not None and thread.is_alive():
                self.loop.call_soon_threadsafe(self._stop.set)
            await asyncio.to_thread(thread.join)

    def _thread(self, caller: asyncio.AbstractEventLoop) -> None:
        try:
            asyncio.run(self._main(caller))
        except Exception:
            log.exception("the lease renewer failed")
        finally:
            self._started.set()  # a renewer that failed to start must not hold up the worker's stop

    async def _main(self, caller: asyncio.AbstractEventLoop) -> None:
        self.loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._started.set()
        settings = self._settings
        assert settings.nats_url is not None  # the worker runs connected
        self.nc = await connect_nats(settings.nats_url, "toolmesh-lease-renewer", **nats_options(settings))
        try:
            kv = await self.nc.jetstream().key_value(LEASES_BUCKET)
            renewals: set[asyncio.Task[None]] = set()
            cut_off = False
            while not await wait_event(self._stop, settings.lease_renew_seconds):
                if not self._serving():
                    if not cut_off:
                        log.warning("the worker's own NATS connection is down: its leases are not renewed")
                    cut_off = True
                    continue
                cut_off = False
                for key in self._leases.held():
                    if key not in self._in_flight:
                        self._in_flight.add(key)
                        task = asyncio.create_task(self._renew(kv, key, caller))
                        renewals.add(task)
                        task.add_done_callback(renewals.discard)
            for task in list(renewals):
                task.cancel()
            await asyncio.gather(*renewals, return_exceptions=True)
        finally:
            await self.nc.close()
            self.loop = self.nc = None

    async def _renew(self, kv: KeyValue, key: str, caller: asyncio.AbstractEventLoop) -> None:
        started = time.monotonic()
        try:
            renewed = await self._leases.renew(key, kv)
        except Exception as exc:  # no answer (timeout, connection down): the lease's age tells
            record_lease_renewal(time.monotonic() - started, "failed")
            log.warning("lease renewal failed: %s", exc or type(exc).__name__, extra={"server_id": key})
            return
        finally:
            self._in_flight.discard(key)
        record_lease_renewal(time.monotonic() - started, "renewed" if renewed else "lost")
        if not renewed:
            caller.call_soon_threadsafe(self._on_lost, key)
