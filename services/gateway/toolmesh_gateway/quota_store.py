"""The quotas table (``mcp.quotas``): written by the gateway, read by every replica's ``QuotaBook``."""

from __future__ import annotations

import uuid

import asyncpg

from toolmesh.contracts.quotas import QuotaRequest
from toolmesh.platform.store.connections import Conn, Db
from toolmesh.platform.store.queries import Row, row_by_id

_COLUMNS = "id::text AS id, namespace, scope, target, per_minute, per_day, per_month, created_by, updated_at"
_SELECT = f"SELECT {_COLUMNS} FROM mcp.quotas"


async def list_quotas(db: Db, namespace: str | None) -> list[Row]:
    """Quotas of a namespace (None: every namespace)."""
    return list(
        await db.fetch(
            f"{_SELECT} WHERE $1::text IS NULL OR namespace = $1::text ORDER BY namespace, scope, target", namespace
        )
    )


async def get_quota(db: Db, quota_id: str, namespace: str | None) -> Row | None:
    """One quota by id in a namespace (None: any); None when unknown, elsewhere or not a UUID."""
    return await row_by_id(db, _SELECT, quota_id, namespace)


async def lock_quota(conn: Conn, quota_id: str) -> Row | None:
    """One quota by id, locked until the end of ``conn``'s transaction (None when it is gone)."""
    return await conn.fetchrow(f"{_SELECT} WHERE id = $1::uuid FOR UPDATE", quota_id)


async def insert_quota(db: Db, namespace: str, target: str, request: QuotaRequest, actor: str) -> str | None:
    """A new quota's id; None when the namespace has a quota of that scope and target already."""
    quota_id = str(uuid.uuid4())
    found = await db.fetchval(
        "INSERT INTO mcp.quotas (id, namespace, scope, target, per_minute, per_day, per_month, created_by) "
        "VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (namespace, scope, target) DO NOTHING "
        "RETURNING id::text",
        quota_id,
        namespace,
        str(request.scope),
        target,
        request.per_minute,
        request.per_day,
        request.per_month,
        actor,
    )
    return str(found) if found is not None else None


async def update_quota(conn: Conn, quota_id: str, target: str, request: QuotaRequest) -> bool:
    """Replace a quota's scope, target and limits; False when another quota has that scope and target."""
    try:
        await conn.execute(
            "UPDATE mcp.quotas SET scope = $2, target = $3, per_minute = $4, per_day = $5, per_month = $6, "
            "updated_at = NOW() WHERE id = $1::uuid",
            quota_id,
            str(request.scope),
            target,
            request.per_minute,
            request.per_day,
            request.per_month,
        )
    except asyncpg.UniqueViolationError:
        return False
    return True


async def delete_quota(db: Db, quota_id: str) -> None:
    """Remove a quota (its counts expire with their windows)."""
    await db.execute("DELETE FROM mcp.quotas WHERE id = $1::uuid", quota_id)
