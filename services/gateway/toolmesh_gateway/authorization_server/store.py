"""The authorization server's rows in Postgres (migrations 0019, 0020): registered clients, requests waiting
for consent, single-use codes, and grants ("connected apps") with their hashed tokens. Every
replica reads and writes the same rows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

Row = asyncpg.Record


@dataclass(frozen=True)
class Consenter:
    """Who allowed a client: an API key (``key_id``), or a person of the identity provider, who has no
    key (``identity``: ``principal_id``, ``name``, ``role``, ``namespace`` as its ID token gave them)."""

    key_id: str | None = None
    identity: dict[str, str] | None = None

    @property
    def principal_id(self) -> str:
        """The consenting principal's id: its key's, or ``jwt:<sub>``."""
        return self.key_id or (self.identity or {})["principal_id"]


_GRANT = (
    "g.grant_id::text AS grant_id, COALESCE(g.key_id::text, g.identity->>'principal_id') AS key_id, g.client_id, "
    "g.client_name, g.resource, g.scopes, g.access_expires_at, g.refresh_expires_at, g.created_at, g.refreshed_at, "
    "COALESCE(p.name, g.identity->>'name') AS key_name, COALESCE(p.role, g.identity->>'role') AS role, "
    "COALESCE(p.namespace, g.identity->>'namespace') AS namespace, p.endpoints, g.identity IS NOT NULL AS is_person"
)
"""A grant with the principal that consented: an API key's row, or the identity it keeps (no key)."""
_FROM_GRANT = "FROM mcp.oauth_grants g LEFT JOIN mcp.principals p ON p.key_id = g.key_id"
_PRINCIPAL_ID = "COALESCE(g.key_id::text, g.identity->>'principal_id')"
_LIVE = "GREATEST(g.access_expires_at, g.refresh_expires_at) > now()"
"""A grant one of whose tokens still works (an expired one is listed no more, and removed a day on)."""


async def save_client(
    db: asyncpg.Pool, client_id: str, metadata: dict[str, Any], sealed_secret: str | None, source: str | None
) -> None:
    """Store a dynamically registered client (``source``: the client address it registered from)."""
    await db.execute(
        "INSERT INTO mcp.oauth_clients(client_id, metadata, sealed_secret, registered_from) VALUES ($1, $2, $3, $4)",
        client_id,
        json.dumps(metadata),
        sealed_secret,
        source,
    )


async def client(db: asyncpg.Pool, client_id: str) -> Row | None:
    """A registered client's metadata and sealed secret."""
    return await db.fetchrow("SELECT metadata, sealed_secret FROM mcp.oauth_clients WHERE client_id = $1", client_id)


async def save_request(
    db: asyncpg.Pool,
    request_id: str,
    client_id: str,
    client_name: str | None,
    issuer: str,
    params: dict[str, Any],
    expires_at: datetime,
) -> None:
    """Keep an authorization request until the person decides (or it expires)."""
    await db.execute("DELETE FROM mcp.oauth_requests WHERE expires_at < now()")
    await db.execute(
        "INSERT INTO mcp.oauth_requests(request_id, client_id, client_name, issuer, params, expires_at) "
        "VALUES ($1, $2, $3, $4, $5, $6)",
        request_id,
        client_id,
        client_name,
        issuer,
        json.dumps(params),
        expires_at,
    )


async def pending_request(db: asyncpg.Pool, request_id: str) -> Row | None:
    """An authorization request that has not expired, with whoever signed in at the identity provider for it."""
    return await db.fetchrow(
        "SELECT client_id, client_name, issuer, params, expires_at, identity, identity_secret_hash "
        "FROM mcp.oauth_requests WHERE request_id = $1 AND expires_at > now()",
        request_id,
    )


async def start_sign_in(db: asyncpg.Pool, request_id: str, state_hash: str, sign_in: dict[str, str]) -> bool:
    """Keep a sign-in at the identity provider for a waiting request (its ``state``, hashed, finds it
    again; ``sign_in``: nonce and PKCE verifier); False when the request is gone."""
    done = await db.fetchval(
        "UPDATE mcp.oauth_requests SET sign_in_state_hash = $2, sign_in = $3 "
        "WHERE request_id = $1 AND expires_at > now() RETURNING 1",
        request_id,
        state_hash,
        sign_in,
    )
    return done is not None


async def take_sign_in(db: asyncpg.Pool, state_hash: str) -> Row | None:
    """The waiting request a sign-in's ``state`` belongs to, with the sign-in (used once: cleared)."""
    return await db.fetchrow(
        "UPDATE mcp.oauth_requests r SET sign_in_state_hash = NULL, sign_in = NULL "
        "FROM (SELECT request_id, sign_in FROM mcp.oauth_requests WHERE sign_in_state_hash = $1 FOR UPDATE) old "
        "WHERE r.request_id = old.request_id AND r.expires_at > now() RETURNING r.request_id, old.sign_in",
        state_hash,
    )


async def sign_in_as(db: asyncpg.Pool, request_id: str, identity: dict[str, str], secret_hash: str) -> None:
    """Who signed in for a waiting request, and the hash of the secret the browser shows to decide it."""
    await db.execute(
        "UPDATE mcp.oauth_requests SET identity = $2, identity_secret_hash = $3 WHERE request_id = $1",
        request_id,
        identity,
        secret_hash,
    )


async def take_request(db: asyncpg.Pool, request_id: str) -> Row | None:
    """Remove an unexpired authorization request and return it (a decision is taken once)."""
    return await db.fetchrow(
        "DELETE FROM mcp.oauth_requests WHERE request_id = $1 AND expires_at > now() "
        "RETURNING client_id, client_name, issuer, params",
        request_id,
    )


async def save_code(
    db: asyncpg.Pool,
    code_hash: str,
    client_id: str,
    consenter: Consenter,
    params: dict[str, Any],
    expires_at: datetime,
) -> None:
    """Store a code the consent gave."""
    await db.execute("DELETE FROM mcp.oauth_codes WHERE expires_at < now() - interval '1 day'")
    await db.execute(
        "INSERT INTO mcp.oauth_codes(code_hash, client_id, key_id, identity, params, expires_at) "
        "VALUES ($1, $2, $3::uuid, $4, $5, $6)",
        code_hash,
        client_id,
        consenter.key_id,
        consenter.identity,
        json.dumps(params),
        expires_at,
    )


async def code(db: asyncpg.Pool, code_hash: str, client_id: str) -> Row | None:
    """A code of ``client_id`` (used or not: ``grant_id`` is set once it was exchanged)."""
    return await db.fetchrow(
        "SELECT key_id::text AS key_id, identity, params, extract(epoch FROM expires_at) AS expires_at, "
        "grant_id::text AS grant_id FROM mcp.oauth_codes WHERE code_hash = $1 AND client_id = $2",
        code_hash,
        client_id,
    )


async def redeem_code(db: asyncpg.Pool, code_hash: str, grant: dict[str, Any]) -> bool:
    """Mark a code used and create the grant it yields, in one transaction; False when the code was
    already used (a replay) or is gone."""
    async with db.acquire() as conn, conn.transaction():
        used = await conn.fetchval(
            "UPDATE mcp.oauth_codes SET grant_id = $2::uuid WHERE code_hash = $1 AND grant_id IS NULL "
            "AND expires_at > now() RETURNING 1",
            code_hash,
            grant["grant_id"],
        )
        if used is None:
            return False
        await conn.execute(
            "DELETE FROM mcp.oauth_grants g WHERE GREATEST(g.access_expires_at, g.refresh_expires_at) "
            "< now() - interval '1 day'"
        )
        await conn.execute(
            "INSERT INTO mcp.oauth_grants(grant_id, key_id, identity, client_id, client_name, resource, scopes, "
            "access_hash, access_expires_at, refresh_hash, refresh_expires_at) "
            "VALUES ($1::uuid, $2::uuid, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            grant["grant_id"],
            grant["consenter"].key_id,
            grant["consenter"].identity,
            grant["client_id"],
            grant["client_name"],
            grant["resource"],
            grant["scopes"],
            grant["access_hash"],
            grant["access_expires_at"],
            grant["refresh_hash"],
            grant["refresh_expires_at"],
        )
        return True


async def grant_by_access(db: asyncpg.Pool, access_hash: str) -> Row | None:
    """The grant an unexpired access token belongs to, with the principal that consented."""
    return await db.fetchrow(
        f"SELECT {_GRANT} {_FROM_GRANT} WHERE g.access_hash = $1 AND g.access_expires_at > now()", access_hash
    )


async def grant_by_refresh(db: asyncpg.Pool, refresh_hash: str, client_id: str) -> Row | None:
    """The grant an unexpired refresh token of ``client_id`` belongs to."""
    return await db.fetchrow(
        f"SELECT {_GRANT} {_FROM_GRANT} "
        "WHERE g.refresh_hash = $1 AND g.client_id = $2 AND g.refresh_expires_at > now()",
        refresh_hash,
        client_id,
    )


async def grant_by_rotated_refresh(db: asyncpg.Pool, refresh_hash: str) -> str | None:
    """The grant that rotated this refresh token away: presented again, it was stolen."""
    value = await db.fetchval(
        "SELECT grant_id::text FROM mcp.oauth_spent_refresh WHERE refresh_hash = $1", refresh_hash
    )
    return str(value) if value is not None else None


async def rotate(
    db: asyncpg.Pool,
    grant_id: str,
    old_refresh_hash: str,
    tokens: dict[str, Any],
    keep_spent_seconds: int,
) -> bool:
    """Replace a grant's tokens (refresh-token rotation) and remember the spent refresh token (for
    ``keep_spent_seconds``, the longest it could have stayed valid); False when ``old_refresh_hash``
    is no longer its refresh token (a concurrent refresh won)."""
    async with db.acquire() as conn, conn.transaction():
        updated = await conn.fetchval(
            "UPDATE mcp.oauth_grants SET access_hash = $3, access_expires_at = $4, refresh_hash = $5, "
            "refresh_expires_at = $6, refreshed_at = now() "
            "WHERE grant_id = $1::uuid AND refresh_hash = $2 RETURNING 1",
            grant_id,
            old_refresh_hash,
            tokens["access_hash"],
            tokens["access_expires_at"],
            tokens["refresh_hash"],
            tokens["refresh_expires_at"],
        )
        if updated is None:
            return False
        await conn.execute(
            "DELETE FROM mcp.oauth_spent_refresh WHERE grant_id = $1::uuid "
            "AND spent_at < now() - make_interval(secs => $2)",
            grant_id,
            float(keep_spent_seconds),
        )
        await conn.execute(
            "INSERT INTO mcp.oauth_spent_refresh(refresh_hash, grant_id) VALUES ($1, $2::uuid)",
            old_refresh_hash,
            grant_id,
        )
        return True


async def delete_grant(db: asyncpg.Pool, grant_id: str) -> Row | None:
    """Remove a grant (its tokens stop working); the removed row, None when there was none."""
    return await db.fetchrow(
        "WITH g AS (DELETE FROM mcp.oauth_grants WHERE grant_id = $1::uuid RETURNING *) "
        f"SELECT {_GRANT} FROM g LEFT JOIN mcp.principals p ON p.key_id = g.key_id",
        grant_id,
    )


async def grants(db: asyncpg.Pool, *, key_id: str | None, namespace: str | None) -> list[Row]:
    """Connected apps whose tokens still work, newest first: of one principal (a key's id, or
    ``jwt:<sub>``), else of a namespace (None: every namespace)."""
    return list(
        await db.fetch(
            f"SELECT {_GRANT} {_FROM_GRANT} WHERE ($1::text IS NULL OR {_PRINCIPAL_ID} = $1) "
            "AND ($2::text IS NULL OR COALESCE(p.namespace, g.identity->>'namespace') = $2) "
            f"AND {_LIVE} ORDER BY g.created_at DESC",
            key_id,
            namespace,
        )
    )


async def grant(db: asyncpg.Pool, grant_id: str) -> Row | None:
    """One connected app."""
    return await db.fetchrow(f"SELECT {_GRANT} {_FROM_GRANT} WHERE g.grant_id::text = $1", grant_id)
