"""Postgres advisory locks: one holder at a time across every replica, released with the block."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import AsyncIterator

import asyncpg

from toolmesh.platform.store.connections import Conn

_NAMESPACE = 7_311_422  # keeps toolmesh's lock keys apart from other applications' in one database


def _key(name: str) -> int:
    return (_NAMESPACE << 32) | zlib.crc32(name.encode())  # one bigint key: (int4, int4) keys are signed


async def transaction_lock(conn: Conn, name: str) -> None:
    """Take the lock called ``name`` until ``conn``'s transaction ends (waiting for any other holder)."""
    await conn.execute("SELECT pg_advisory_xact_lock($1)", _key(name))


@contextlib.asynccontextmanager
async def advisory_lock(db: asyncpg.Pool, name: str) -> AsyncIterator[None]:
    """Hold the lock called ``name`` for the block (waiting for any other holder first)."""
    key = _key(name)
    async with db.acquire() as conn:
        await conn.execute("SELECT pg_advisory_lock($1)", key)
        try:
            yield
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", key)
