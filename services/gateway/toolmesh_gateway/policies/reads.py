"""Reads of the policies on tool calls and their versions (the projector writes both)."""

from __future__ import annotations

import asyncpg

from toolmesh.platform.store.queries import Row

_COLUMNS = (
    "id::text AS id, namespace, name, expression, effect, reason, redact, mode, version, created_by, created_at, "
    "updated_by, updated_at"
)
_SEEN = "($1::text IS NULL OR namespace IS NULL OR namespace = $1::text)"


async def list_policies(db: asyncpg.Pool, namespace: str | None) -> list[Row]:
    """The policies a caller of ``namespace`` sees (its own and the global ones; None: all), by name."""
    rows = await db.fetch(
        f"SELECT {_COLUMNS} FROM mcp.policies WHERE {_SEEN} ORDER BY namespace NULLS FIRST, name", namespace
    )
    return list(rows)


async def get_policy(db: asyncpg.Pool, policy_id: str, namespace: str | None) -> Row | None:
    """One policy a caller of ``namespace`` sees; None when unknown, elsewhere or not a UUID."""
    try:
        return await db.fetchrow(
            f"SELECT {_COLUMNS} FROM mcp.policies WHERE id = $2::uuid AND {_SEEN}", namespace, policy_id
        )
    except asyncpg.DataError:
        return None


async def policy_named(db: asyncpg.Pool, namespace: str | None, name: str) -> Row | None:
    """The policy of that name in ``namespace`` (None: the global ones)."""
    return await db.fetchrow(
        f"SELECT {_COLUMNS} FROM mcp.policies WHERE namespace IS NOT DISTINCT FROM $1::text AND name = $2",
        namespace,
        name,
    )


async def policy_versions(db: asyncpg.Pool, policy_id: str) -> list[Row]:
    """Every version of a policy, newest first (none for an unknown id or one that is not a UUID)."""
    try:
        rows = await db.fetch(
            "SELECT version, name, namespace, expression, effect, reason, redact, mode, deleted, actor, at "
            "FROM mcp.policy_versions WHERE policy_id = $1::uuid ORDER BY version DESC",
            policy_id,
        )
    except asyncpg.DataError:
        return []
    return list(rows)
