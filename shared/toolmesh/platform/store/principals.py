"""API keys of principals: stored hashed, each with a role and a namespace (not event-sourced)."""

from __future__ import annotations

import asyncpg

from toolmesh.platform.store.locks import transaction_lock

Row = asyncpg.Record
BOOTSTRAP_OWNER = "admin"
"""Name of the owner whose key start-up seeds from the admin token (no event records it)."""
_COLUMNS = "key_id::text AS id, name, role, namespace, created_at, created_by, endpoints"


async def principal_for_token_hash(db: asyncpg.Pool, token_hash: str) -> Row | None:
    """The principal owning an API key hash."""
    return await db.fetchrow(f"SELECT {_COLUMNS} FROM mcp.principals WHERE token_hash = $1", token_hash)


async def insert_key(
    db: asyncpg.Pool,
    *,
    key_id: str,
    name: str,
    token_hash: str,
    role: str,
    namespace: str,
    created_by: str | None,
    endpoints: list[str] | None = None,
) -> Row | None:
    """Store a new key (``endpoints``: the only MCP endpoints it may use); None when the namespace
    already has a key of that name."""
    try:
        return await db.fetchrow(
            "INSERT INTO mcp.principals(key_id, name, token_hash, role, namespace, created_by, endpoints) "
            f"VALUES ($1::uuid, $2, $3, $4, $5, $6, $7) RETURNING {_COLUMNS}",
            key_id,
            name,
            token_hash,
            role,
            namespace,
            created_by,
            endpoints,
        )
    except asyncpg.UniqueViolationError:
        return None


async def key_exists(db: asyncpg.Pool, key_id: str) -> bool:
    """Whether the API key ``key_id`` exists (it was not revoked)."""
    return bool(await db.fetchval("SELECT EXISTS(SELECT 1 FROM mcp.principals WHERE key_id::text = $1)", key_id))


async def list_keys(db: asyncpg.Pool, namespace: str | None, *, include_owners: bool) -> list[Row]:
    """Keys of a namespace (None: every namespace), oldest first."""
    return list(
        await db.fetch(
            f"SELECT {_COLUMNS} FROM mcp.principals WHERE ($1::text IS NULL OR namespace = $1::text) "
            "AND ($2 OR role <> 'owner') ORDER BY created_at, name",
            namespace,
            include_owners,
        )
    )


async def delete_key(db: asyncpg.Pool, key_id: str, namespace: str | None, *, include_owners: bool) -> Row | None:
    """Delete a key of a namespace (None: any); the deleted row, or None when there is no such key."""
    try:
        return await db.fetchrow(
            "DELETE FROM mcp.principals WHERE key_id = $1::uuid AND ($2::text IS NULL OR namespace = $2::text) "
            f"AND ($3 OR role <> 'owner') RETURNING {_COLUMNS}",
            key_id,
            namespace,
            include_owners,
        )
    except asyncpg.DataError:
        return None


async def seed_owner(db: asyncpg.Pool, *, name: str, token_hash: str, namespace: str) -> None:
    """Make ``token_hash`` the key of the bootstrap owner ``name`` (created, or re-keyed at start-up).

    Re-keyed, the owner's connected apps and unused OAuth codes go with the old token: they were
    allowed by whoever held it, and rotating a leaked admin token must end them too. Processes starting
    at once seed one after another: inserted side by side, the same token would collide on its own index."""
    async with db.acquire() as conn, conn.transaction():
        await transaction_lock(conn, f"seed-owner:{namespace}:{name}")
        old = await conn.fetchval(
            "SELECT key_id FROM mcp.principals WHERE namespace = $1 AND name = $2 AND token_hash <> $3 FOR UPDATE",
            namespace,
            name,
            token_hash,
        )
        if old is not None:
            await conn.execute("DELETE FROM mcp.oauth_grants WHERE key_id = $1", old)
            await conn.execute("DELETE FROM mcp.oauth_codes WHERE key_id = $1", old)
        await conn.execute(
            "INSERT INTO mcp.principals(key_id, name, token_hash, role, namespace) "
            "VALUES (gen_random_uuid(), $1, $2, 'owner', $3) "
            "ON CONFLICT (namespace, name) DO UPDATE SET token_hash = EXCLUDED.token_hash, role = 'owner'",
            name,
            token_hash,
            namespace,
        )
