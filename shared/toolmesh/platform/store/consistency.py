"""Read-your-writes: wait (bounded) until the projector has applied a stream sequence."""

from __future__ import annotations

import logging

import asyncpg

from toolmesh.platform.polling import poll_until
from toolmesh.platform.store.queries import applied_sequence

log = logging.getLogger("toolmesh.gateway")


async def wait_for_projection(db: asyncpg.Pool, seq: int, timeout: float) -> bool:
    """True once the projection includes ``seq``; False (logged) when ``timeout`` passed first."""

    async def applied() -> bool:
        return await applied_sequence(db) >= seq

    if await poll_until(applied, timeout, interval=0.002, max_interval=0.05):
        return True
    log.warning("projection has not applied sequence %d after %.1fs", seq, timeout)
    return False
