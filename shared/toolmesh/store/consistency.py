"""Read-your-writes: wait (bounded) until the projector has applied a stream sequence."""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg

from toolmesh.store.queries import applied_sequence

log = logging.getLogger("toolmesh.gateway")


async def wait_for_projection(db: asyncpg.Pool, seq: int, timeout: float) -> bool:
    """True once the projection includes ``seq``; False (logged) when ``timeout`` passed first."""
    deadline = time.monotonic() + timeout
    pause = 0.002
    while True:
        if await applied_sequence(db) >= seq:
            return True
        if time.monotonic() >= deadline:
            log.warning("projection has not applied sequence %d after %.1fs", seq, timeout)
            return False
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.05)
