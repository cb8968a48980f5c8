"""The bootstrap owner's key seeded by several processes starting at once (two gateways of one
deployment, every role in its own process): each start-up succeeds, and one owner row holds the token."""

from __future__ import annotations

import asyncio

import pytest

from toolmesh.credentials import hash_token
from toolmesh.platform.store.pool import open_pool
from toolmesh.platform.store.principals import seed_owner

pytestmark = pytest.mark.integration
STARTING_AT_ONCE = 12
ROUNDS = 40


async def test_processes_seeding_the_same_owner_token_at_once_all_start(database_url: str) -> None:
    db = await open_pool(database_url, min_size=STARTING_AT_ONCE, max_size=STARTING_AT_ONCE)
    try:
        for round_ in range(ROUNDS):  # every round, every process inserts the same new row at once
            await db.execute("DELETE FROM mcp.principals WHERE name = 'admin'")
            token_hash = hash_token(f"admin-token-{round_}")
            seeds = (
                seed_owner(db, name="admin", token_hash=token_hash, namespace="default")
                for _ in range(STARTING_AT_ONCE)
            )
            await asyncio.gather(*seeds)
            rows = await db.fetch("SELECT token_hash, role FROM mcp.principals WHERE name = 'admin'")
            assert [(row["token_hash"], row["role"]) for row in rows] == [(token_hash, "owner")]
    finally:
        await db.close()
