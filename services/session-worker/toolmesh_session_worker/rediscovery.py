"""Publishing a list the upstream says changed, while Postgres or NATS may be restarting.

A ``list_changed`` notification arrives once; if the backends cannot be reached at that moment,
the change would be lost. ``rediscover`` keeps trying (capped backoff) until they are back.

An upstream may say a list changed as often as it likes: ``Rediscoveries`` runs one re-discovery of
a list at a time, and the changes announced while it runs make one more, however many they were.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import asyncpg
import nats.errors

from toolmesh.errors import LimitExceeded
from toolmesh.platform.polling import poll_until
from toolmesh.platform.supervision import TaskSet
from toolmesh_session_worker.upstream import UpstreamError

log = logging.getLogger("toolmesh.session")
REDISCOVERY_RETRY_SECONDS = 300.0
"""How long a list change keeps being published while the backends cannot be reached."""
BACKEND_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    nats.errors.Error,
)
"""Failures of Postgres or NATS (not of the upstream): worth retrying once they are back."""


async def rediscover(discover: Callable[[], Awaitable[int]], server: str) -> None:
    """Publish the changed list with ``discover``; retried (capped backoff) while Postgres or NATS
    cannot be reached, so a change announced during a backend restart is not lost."""

    async def attempt() -> bool:
        try:
            await discover()
        except BACKEND_ERRORS as exc:
            log.warning("re-discovery waits for the backends: %s", exc, extra={"server": server})
            raise
        return True

    try:
        if not await poll_until(
            attempt, REDISCOVERY_RETRY_SECONDS, interval=0.5, max_interval=5.0, retry_on=BACKEND_ERRORS
        ):
            log.error("re-discovery gave up after %.0fs", REDISCOVERY_RETRY_SECONDS, extra={"server": server})
    except (UpstreamError, LimitExceeded) as exc:
        log.warning("re-discovery failed: %s", exc, extra={"server": server})


class Rediscoveries:
    """The re-discoveries of one server's lists, run in ``tasks``: one per list at a time."""

    def __init__(self, server: str, tasks: TaskSet) -> None:
        self._server = server
        self._tasks = tasks
        self._again: dict[str, bool] = {}  # list being re-discovered -> changed again since its pass began

    def changed(self, kind: str, discover: Callable[[], Awaitable[int]]) -> None:
        """The upstream says list ``kind`` changed: re-discover it with ``discover``, after the pass
        running now if there is one."""
        if kind in self._again:
            self._again[kind] = True
            return
        self._again[kind] = False
        self._tasks.spawn(self._run(kind, discover))

    async def _run(self, kind: str, discover: Callable[[], Awaitable[int]]) -> None:
        try:
            while True:
                self._again[kind] = False
                await rediscover(discover, self._server)
                if not self._again[kind]:
                    return
        finally:
            self._again.pop(kind, None)
