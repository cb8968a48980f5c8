"""Servers removed for good, as the audit log records them (ids are never reused)."""

from __future__ import annotations

from collections.abc import Collection

import asyncpg

from toolmesh.errors import BackendUnavailable
from toolmesh.platform.store.connections import Db


async def removed_among(db: Db, server_ids: Collection[str]) -> set[str]:
    """Those of ``server_ids`` (UUIDs) whose removal was projected.

    Positive evidence only: a server absent from the read model may just not be projected yet (a
    rebuild replays from an empty read model), so absence never counts as removal.
    """
    if not server_ids:
        return set()
    try:
        rows = await db.fetch(
            "SELECT DISTINCT server_id::text AS id FROM mcp.audit_log "
            "WHERE event = 'server.removed' AND server_id = ANY($1::uuid[])",
            list(server_ids),
        )
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise BackendUnavailable(f"Removed servers not read from Postgres: {exc}") from exc
    return {row["id"] for row in rows}
