"""Numbered ``.sql`` migrations applied at start-up, once, under an advisory lock."""

from __future__ import annotations

import logging
from importlib import resources

import asyncpg

log = logging.getLogger("toolmesh.store")
_LOCK_KEY = 7_311_422_001


def migration_files() -> list[tuple[int, str, str]]:
    """``(number, name, sql)`` of every shipped migration, in order."""
    folder = resources.files("toolmesh.platform.store") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text()))
    return sorted(found)


async def apply_migrations(conn: asyncpg.Connection) -> list[str]:
    """Apply what is missing; returns the names applied now. Safe to run from many processes."""
    applied_now: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS public.toolmesh_migrations "
            "(number INT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT NOW())"
        )
        done = {r["number"] for r in await conn.fetch("SELECT number FROM public.toolmesh_migrations")}
        for number, name, sql in migration_files():
            if number in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO public.toolmesh_migrations(number, name) VALUES ($1, $2)", number, name)
            log.debug("applied migration %s", name)
            applied_now.append(name)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    if applied_now:
        log.info("database schema migrated: %d migrations applied, the last %s", len(applied_now), applied_now[-1])
    return applied_now
