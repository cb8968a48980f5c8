"""The asyncpg pool every role opens: JSON codecs, migrations, and a clear error when down."""

from __future__ import annotations

import json

import asyncpg

from toolmesh.errors import BackendUnavailable
from toolmesh.platform.store.migrate import apply_migrations


async def _init_connection(conn: asyncpg.Connection) -> None:
    for kind in ("json", "jsonb"):
        await conn.set_type_codec(kind, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def open_pool(url: str, *, migrate: bool = True, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """Open a pool on ``url`` (migrating the schema first); ``BackendUnavailable`` if unreachable."""
    try:
        if migrate:
            conn = await asyncpg.connect(url, timeout=10)
            try:
                await apply_migrations(conn)
            finally:
                await conn.close()
        pool = await asyncpg.create_pool(
            url, min_size=min_size, max_size=max_size, init=_init_connection, timeout=10, command_timeout=30
        )
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        raise BackendUnavailable(f"Postgres unreachable: {exc}") from exc
    assert pool is not None
    return pool
