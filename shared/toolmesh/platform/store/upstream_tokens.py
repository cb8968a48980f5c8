"""Upstream OAuth grants in ``mcp.upstream_tokens``, sealed with the credential key.

The gateway stores the grant its OAuth callback obtained; the session-worker reads it to send
``Authorization: Bearer`` and stores what a refresh brings; a credential-key rotation seals each
grant again (``toolmesh.rotation``). Nothing of a grant is stored in plain
text but the issuer and the expiry.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import asyncpg

from toolmesh.credentials import CredentialBox
from toolmesh.platform.store.connections import Db
from toolmesh.redaction import Secret

SHARED_IDENTITY = ""
"""The ``principal`` of the shared (service-account) identity's row."""


@dataclass(frozen=True)
class UpstreamGrant:
    """What an authorization server issued toolmesh, and what refreshing it takes."""

    issuer: str
    token_endpoint: str
    access_token: str
    client_id: str
    auth_method: str = "none"
    """How the client authenticates at the token endpoint: none, client_secret_basic or client_secret_post."""
    refresh_token: str | None = None
    expires_at: float | None = None
    """Unix time the access token expires, when the server said."""
    lifetime: float | None = None
    """The access token's ``expires_in`` as issued (seconds)."""
    client_secret: str | None = None
    resource: str | None = None
    scope: str | None = None
    """The scope granted (the token endpoint's, else the one asked for)."""
    requested_scope: str | None = None
    """The scope the authorization asked for (``toolmesh.oauth_tokens.granted`` keeps it)."""

    def expires_within(self, seconds: float, now: float | None = None) -> bool:
        """Whether the access token expires within ``seconds`` (never, when no expiry is known)."""
        current = datetime.now(UTC).timestamp() if now is None else now
        return self.expires_at is not None and self.expires_at - current <= seconds

    def secrets(self) -> list[Secret]:
        """The values of this grant the log redactor must know."""
        values = (self.access_token, self.refresh_token, self.client_secret)
        return [Secret(value, "token") for value in values if value]


def _columns(box: CredentialBox, grant: UpstreamGrant) -> tuple[str, str, datetime | None]:
    """The stored columns of ``grant``: its issuer, the grant sealed, and its expiry."""
    expires = datetime.fromtimestamp(grant.expires_at, UTC) if grant.expires_at is not None else None
    return grant.issuer, box.seal(asdict(grant)), expires


def _opened(box: CredentialBox, sealed: str) -> UpstreamGrant:
    return UpstreamGrant(**box.open(sealed))


async def save_grant(
    db: asyncpg.Pool, box: CredentialBox, server_id: str, grant: UpstreamGrant, principal: str
) -> bool:
    """Store (or replace) the grant of ``server_id`` for ``principal``, sealed; False when the server is
    gone (removed while it was being authorized: nothing is stored). The server's row is locked until
    the grant is in, so a removal projected meanwhile waits and then deletes the grant with it. A scope
    a challenge wanted (``want_scope``) is cleared: this grant answers it."""
    status = await db.execute(
        "INSERT INTO mcp.upstream_tokens(server_id, principal, issuer, sealed_grant, expires_at, updated_at) "
        "SELECT id, $2, $3, $4, $5, now() FROM mcp.external_servers WHERE id = $1 FOR KEY SHARE "
        "ON CONFLICT (server_id, principal) DO UPDATE SET "
        "issuer = EXCLUDED.issuer, sealed_grant = EXCLUDED.sealed_grant, expires_at = EXCLUDED.expires_at, "
        "wanted_scope = NULL, updated_at = now()",
        server_id,
        principal,
        *_columns(box, grant),
    )
    return bool(status == "INSERT 0 1")


async def load_grant(db: asyncpg.Pool, box: CredentialBox, server_id: str, principal: str) -> UpstreamGrant | None:
    """The grant of ``server_id`` for ``principal``, or None when it was never authorized."""
    sealed = await db.fetchval(
        "SELECT sealed_grant FROM mcp.upstream_tokens WHERE server_id = $1 AND principal = $2", server_id, principal
    )
    return _opened(box, sealed) if sealed is not None else None


async def update_grant(
    db: asyncpg.Pool, box: CredentialBox, server_id: str, grant: UpstreamGrant, principal: str
) -> bool:
    """Replace the stored grant of ``server_id`` for ``principal`` with a refreshed one; False when there
    is none any more (the server was removed or the principal's key revoked since: nothing is stored)."""
    status = await db.execute(
        "UPDATE mcp.upstream_tokens SET issuer = $3, sealed_grant = $4, expires_at = $5, updated_at = now() "
        "WHERE server_id = $1 AND principal = $2",
        server_id,
        principal,
        *_columns(box, grant),
    )
    return bool(status == "UPDATE 1")


async def want_scope(db: asyncpg.Pool, server_id: str, principal: str, scope: str) -> bool:
    """Record ``scope`` as what the next authorization of the grant of ``server_id`` for ``principal``
    asks for (an upstream's insufficient_scope challenge); False when there is no such grant."""
    status = await db.execute(
        "UPDATE mcp.upstream_tokens SET wanted_scope = $3 WHERE server_id = $1 AND principal = $2",
        server_id,
        principal,
        scope,
    )
    return bool(status == "UPDATE 1")


async def grant_record(db: asyncpg.Pool, server_id: str, principal: str) -> asyncpg.Record | None:
    """The issuer, last write (``updated_at``) and ``wanted_scope`` (see ``want_scope``) of a stored
    grant, never the grant; None without one."""
    return await db.fetchrow(
        "SELECT issuer, updated_at, wanted_scope FROM mcp.upstream_tokens WHERE server_id = $1 AND principal = $2",
        server_id,
        principal,
    )


async def discovery_grant(db: asyncpg.Pool, box: CredentialBox, server_id: str) -> tuple[str, UpstreamGrant] | None:
    """The principal and grant a per-user server's own session (discovery, health) uses, or None when
    nobody authorized it: an owner's or admin's grant first (the one authorized or refreshed last), else
    the grant of the key created first (a user key authorizing again or last does not take the
    namespace's catalog over; a JWT caller, with no key, comes last)."""
    row = await db.fetchrow(
        "SELECT t.principal, t.sealed_grant FROM mcp.upstream_tokens t "
        "LEFT JOIN mcp.principals p ON p.key_id::text = t.principal "
        "WHERE t.server_id = $1 "
        "ORDER BY (p.role IN ('owner', 'admin')) IS TRUE DESC, "
        "CASE WHEN p.role IN ('owner', 'admin') THEN t.updated_at END DESC, "
        "p.created_at ASC NULLS LAST, t.principal LIMIT 1",
        server_id,
    )
    return (row["principal"], _opened(box, row["sealed_grant"])) if row is not None else None


async def drop_principal_grants(db: Db, principal: str) -> int:
    """Forget every grant of ``principal`` (its key was revoked); how many there were."""
    if principal == SHARED_IDENTITY:
        raise ValueError("the shared identity's grants go with their servers, not with a key")
    status = await db.execute("DELETE FROM mcp.upstream_tokens WHERE principal = $1", principal)
    return int(status.split()[-1])


async def drop_grants(db: Db, server_id: str) -> None:
    """Forget every grant of ``server_id`` (a removed server)."""
    await db.execute("DELETE FROM mcp.upstream_tokens WHERE server_id = $1", server_id)


async def sealed_grants(db: asyncpg.Pool) -> list[asyncpg.Record]:
    """Every stored grant's key and sealed value, for key rotation."""
    return list(
        await db.fetch(
            "SELECT server_id, principal, sealed_grant FROM mcp.upstream_tokens ORDER BY server_id, principal"
        )
    )


async def replace_sealed_grant(db: asyncpg.Pool, server_id: str, principal: str, was: str, sealed: str) -> bool:
    """Store ``sealed`` in place of ``was`` (the same grant sealed again); False when the row changed
    since it was read (a refresh or an authorization stored a newer grant, which wins)."""
    status = await db.execute(
        "UPDATE mcp.upstream_tokens SET sealed_grant = $4 "
        "WHERE server_id = $1 AND principal = $2 AND sealed_grant = $3",
        server_id,
        principal,
        was,
        sealed,
    )
    return bool(status == "UPDATE 1")
