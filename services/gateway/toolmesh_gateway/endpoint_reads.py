"""Reads of the endpoints (bundles) of the read model."""

from __future__ import annotations

import asyncpg

from toolmesh.platform.store.connections import Db
from toolmesh.platform.store.queries import Row, row_by_id

_COLUMNS = (
    "id::text AS id, namespace, name, description, include, exclude, overrides, created_by, created_at, updated_at"
)


async def list_endpoints(db: Db, namespace: str | None) -> list[Row]:
    """Endpoints of a namespace (None: every namespace), by name."""
    return list(
        await db.fetch(
            f"SELECT {_COLUMNS} FROM mcp.endpoints WHERE $1::text IS NULL OR namespace = $1::text "
            "ORDER BY name, namespace",
            namespace,
        )
    )


async def get_endpoint(db: asyncpg.Pool, endpoint_id: str, namespace: str | None) -> Row | None:
    """One endpoint by id in a namespace (None: any); None when unknown, elsewhere or not a UUID."""
    return await row_by_id(db, f"SELECT {_COLUMNS} FROM mcp.endpoints", endpoint_id, namespace)


async def endpoint_named(db: asyncpg.Pool, namespace: str, name: str) -> Row | None:
    """One endpoint by name in a namespace."""
    return await db.fetchrow(
        f"SELECT {_COLUMNS} FROM mcp.endpoints WHERE namespace = $1 AND name = $2", namespace, name
    )
