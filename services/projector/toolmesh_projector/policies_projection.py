"""Policies in the read model: the current definition, every version, and the audit log."""

from __future__ import annotations

import logging

import asyncpg

from toolmesh.contracts.policies import PolicyDeleted, PolicySaved
from toolmesh.platform.store.connections import Conn
from toolmesh_projector.projection_trail import audit

log = logging.getLogger("toolmesh.projection")


async def policy_saved(conn: Conn, event: PolicySaved) -> None:
    """Create or replace a policy, one version more than it had (1 when new), and keep that version."""
    p = event.policy
    try:
        async with conn.transaction():
            version = await conn.fetchval(
                "INSERT INTO mcp.policies(id, namespace, name, expression, effect, reason, redact, mode, version, "
                "created_by, created_at, updated_by, updated_at) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $10, $9, $10) "
                "ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, expression = EXCLUDED.expression, "
                "effect = EXCLUDED.effect, reason = EXCLUDED.reason, redact = EXCLUDED.redact, mode = EXCLUDED.mode, "
                "version = mcp.policies.version + 1, updated_by = EXCLUDED.updated_by, "
                "updated_at = EXCLUDED.updated_at RETURNING version",
                event.policy_id,
                p.namespace,
                p.name,
                p.expression,
                p.effect,
                p.reason,
                p.redact,
                p.mode,
                event.actor,
                event.occurred_at,
            )
    except asyncpg.UniqueViolationError:
        log.error("policy %s dropped: the name is taken in %s", p.name, p.namespace or "the global policies")
        return
    await _version(conn, event.policy_id, version, event, deleted=False)
    await audit(conn, event, None, {"policy_id": event.policy_id, **p.model_dump(), "version": version})


async def policy_deleted(conn: Conn, event: PolicyDeleted) -> None:
    """Delete a policy; its history keeps one more version, marked deleted."""
    row = await conn.fetchrow("SELECT version FROM mcp.policies WHERE id = $1", event.policy_id)
    if row is None:
        return
    await _version(conn, event.policy_id, row["version"] + 1, event, deleted=True)
    await conn.execute("DELETE FROM mcp.policies WHERE id = $1", event.policy_id)
    await audit(conn, event, None, {"policy_id": event.policy_id, "name": event.name, "version": row["version"] + 1})


async def _version(conn: Conn, policy_id: str, version: int, event: PolicySaved | PolicyDeleted, deleted: bool) -> None:
    await conn.execute(
        "INSERT INTO mcp.policy_versions(policy_id, version, namespace, name, expression, effect, reason, redact, "
        "mode, deleted, actor, at) "
        "SELECT id, $2, namespace, name, expression, effect, reason, redact, mode, $3, $4, $5 "
        "FROM mcp.policies WHERE id = $1",
        policy_id,
        version,
        deleted,
        event.actor,
        event.occurred_at,
    )
