"""The OAuth grants of a server registered with ``auth.mode: oauth``, as its upstream sessions use
them: the access token, refreshed before it expires and once when the upstream refuses it, and the
refreshed tokens stored sealed again (``toolmesh.platform.store.upstream_tokens``).

An upstream that has no grant, or whose grant can no longer be refreshed, waits in ERROR with
``needs_authorization`` (no automatic retry) until someone authorizes it (shared identity: an owner
or admin; per-user identity: any principal, whose grant the server's own session then uses for
discovery and health); the callback then connects it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
import httpx2

from toolmesh.contracts.upstream_auth import NEEDS_AUTHORIZATION, upstream_auth
from toolmesh.credentials import CredentialBox
from toolmesh.egress.bounded import bounded_client
from toolmesh.egress.policy import EgressPolicy
from toolmesh.oauth_tokens import TokenRequestFailed, refreshed, usable_scope
from toolmesh.platform.store.upstream_tokens import (
    SHARED_IDENTITY,
    UpstreamGrant,
    discovery_grant,
    load_grant,
    update_grant,
    want_scope,
)
from toolmesh.redaction import process_redactor
from toolmesh_session_worker.upstream import UpstreamRefused
from toolmesh_session_worker.upstream.challenges import ScopeChallenge, covers, joined

log = logging.getLogger("toolmesh.session")
REFRESH_MARGIN_SECONDS = 60.0
"""An access token is refreshed before it is sent when it expires within this many seconds, or within
half its lifetime if that is shorter (a token that lives 60 s is not refreshed on every request)."""
_LIMITS = httpx2.Limits(max_connections=4, max_keepalive_connections=0)


def needs_authorization(server_id: str, per_user: bool = False) -> str:
    """The ``error_message`` of a server waiting for someone to authorize it."""
    who = "any user of the server" if per_user else "an owner or admin"
    return (
        f"{NEEDS_AUTHORIZATION} the upstream's OAuth grant is missing or can no longer be refreshed; "
        f"{who} authorizes it with POST /api/v1/aggregator/servers/{server_id}/authorize"
    )


class AuthorizationNeeded(UpstreamRefused):
    """The server has no usable grant: connecting cannot succeed until someone authorizes it."""

    def __init__(self, server_id: str, per_user: bool = False) -> None:
        words = needs_authorization(server_id, per_user)
        super().__init__(words, summary=words)


class GrantStore(Protocol):
    """Where one server's grant is kept."""

    async def load(self) -> UpstreamGrant | None:
        """The stored grant, None when there is none."""
        ...

    async def save(self, grant: UpstreamGrant) -> bool:
        """Replace the stored grant with a refreshed one; False (nothing stored) when it was dropped
        since (its key revoked, its server removed)."""
        ...

    async def want(self, scope: str) -> None:
        """Record ``scope`` as what the next authorization of the grant asks for."""
        ...


class StoredGrant:
    """A server's grant for one principal (the shared identity by default) in ``mcp.upstream_tokens``,
    sealed with the credential key."""

    def __init__(self, db: asyncpg.Pool, box: CredentialBox, server_id: str, principal: str = SHARED_IDENTITY) -> None:
        self._db = db
        self._box = box
        self._server_id = server_id
        self._principal = principal

    async def load(self) -> UpstreamGrant | None:
        """The stored grant."""
        return await load_grant(self._db, self._box, self._server_id, self._principal)

    async def save(self, grant: UpstreamGrant) -> bool:
        """Store ``grant`` sealed in place of the one it refreshed; False when that one was dropped."""
        return await update_grant(self._db, self._box, self._server_id, grant, self._principal)

    async def want(self, scope: str) -> None:
        """Record ``scope`` for the gateway's next authorization of this grant."""
        await want_scope(self._db, self._server_id, self._principal, scope)


class DiscoveryGrant:
    """The grant a per-user server's own session (discovery, health) uses: an owner's or admin's
    first, else the earliest key's (``discovery_grant``); a refresh goes back to that principal's row."""

    def __init__(self, db: asyncpg.Pool, box: CredentialBox, server_id: str) -> None:
        self._db = db
        self._box = box
        self._server_id = server_id
        self._principal: str | None = None

    async def load(self) -> UpstreamGrant | None:
        """The grant discovery uses now."""
        found = await discovery_grant(self._db, self._box, self._server_id)
        if found is None:
            return None
        self._principal, grant = found
        return grant

    async def save(self, grant: UpstreamGrant) -> bool:
        """Store ``grant`` sealed in place of the one it refreshed; False when that one was dropped
        (the next load takes another principal's)."""
        if self._principal is None:
            return False
        return await update_grant(self._db, self._box, self._server_id, grant, self._principal)

    async def want(self, scope: str) -> None:
        """Record ``scope`` for the next authorization of the grant in use."""
        if self._principal is not None:
            await want_scope(self._db, self._server_id, self._principal, scope)


def egress_client(egress: EgressPolicy) -> Callable[[], httpx2.AsyncClient]:
    """Clients for the token endpoint that reach only what ``egress`` allows, follow no redirect and
    read no answer past ``DOCUMENT_MAX_BYTES``."""
    return lambda: bounded_client(egress, _LIMITS, follow_redirects=False)


class GrantKeeper:
    """The grant of one server, for its sessions (``upstream.bearer.Grants``)."""

    def __init__(
        self,
        store: GrantStore,
        client: Callable[[], httpx2.AsyncClient],
        server_id: str,
        clock: Callable[[], float] = time.time,
        per_user: bool = False,
    ) -> None:
        self._store = store
        self._client = client
        self.server_id = server_id
        self._per_user = per_user
        self._clock = clock
        self._grant: UpstreamGrant | None = None
        self._refused: str | None = None  # a refresh token the authorization server refused: not tried again
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the stored grant.

        Raises:
            AuthorizationNeeded: the server was never authorized.
        """
        grant = await self._store.load()
        if grant is None:
            raise AuthorizationNeeded(self.server_id, self._per_user)
        self._keep(grant)

    def _keep(self, grant: UpstreamGrant) -> None:
        """Use ``grant`` from now on; the secrets of the one it replaces are retired from the log
        redactor (masked a while longer, then forgotten: a refresh every second adds no end of them)."""
        previous, self._grant = self._grant, grant
        redactor = process_redactor()
        redactor.add(grant.secrets())
        if previous is not None:
            kept = {secret.value for secret in grant.secrets()}
            redactor.retire(secret for secret in previous.secrets() if secret.value not in kept)

    def _due(self, grant: UpstreamGrant) -> bool:
        margin = REFRESH_MARGIN_SECONDS if grant.lifetime is None else min(REFRESH_MARGIN_SECONDS, grant.lifetime / 2)
        usable = bool(grant.refresh_token) and grant.refresh_token != self._refused
        return usable and grant.expires_within(margin, self._clock())

    @property
    def current(self) -> str | None:
        """The access token held now (neither refreshed nor reloaded)."""
        return self._grant.access_token if self._grant is not None else None

    async def access_token(self) -> str | None:
        """The access token, refreshed first when it is about to expire (``REFRESH_MARGIN_SECONDS``)."""
        grant = self._grant
        if grant is None:  # dropped by a refresh: whatever is stored now (another principal's, or none)
            async with self._lock:
                if self._grant is None and (stored := await self._store.load()) is not None:
                    self._keep(stored)
        elif self._due(grant):
            async with self._lock:
                if self._grant is grant:
                    await self._refresh_latest(grant)
        return self._grant.access_token if self._grant is not None else None

    async def _refresh_latest(self, held: UpstreamGrant) -> None:
        """Refresh the stored grant: one authorized since ``held`` was loaded wins over it (refreshing
        ``held`` would store the old account's tokens over the new ones); none left (the server was
        removed, the key revoked): nothing to refresh."""
        stored = await self._store.load()
        if stored is None:  # nor is the held one sent any more
            self._grant = None
            return
        if stored.access_token != held.access_token:
            self._keep(stored)
            if not self._due(stored):
                return
        await self._refresh(stored)

    async def renewed(self, refused: str) -> str | None:
        """Another access token than ``refused``: one stored since (a new authorization), else a refreshed one."""
        async with self._lock:
            if self._grant is not None and self._grant.access_token != refused:
                return self._grant.access_token
            stored = await self._store.load()
            if stored is not None and stored.access_token != refused:
                self._keep(stored)
                return stored.access_token
            if stored is None or stored.refresh_token == self._refused or not await self._refresh(stored):
                return None
            return self._grant.access_token if self._grant is not None else None

    async def stored_since(self, refused: str) -> str | None:
        """Another access token than ``refused``, held or stored since (a new authorization); never a
        refreshed one (a refresh keeps the scope)."""
        async with self._lock:
            if self._grant is not None and self._grant.access_token != refused:
                return self._grant.access_token
            stored = await self._store.load()
            if stored is None or stored.access_token == refused:
                return None
            self._keep(stored)
            return stored.access_token

    async def challenged(self, required: str | None) -> ScopeChallenge:
        """The upstream requires scope ``required`` that the grant lacks: record the scope to ask for
        (what the grant asked for and was granted, and ``required``) where the gateway's authorize
        reads it; when the grant already asked for ``required`` (its authorization was that step-up,
        or the authorization server would not grant it) nothing is wanted: authorizing again would
        not help, and asking would loop."""
        grant = self._grant
        if grant is None or required is None:
            return ScopeChallenge(required, None)
        asked = joined(grant.requested_scope, grant.scope)
        wanted = usable_scope(joined(asked, required))
        if covers(asked, required) or wanted is None:
            log.warning(
                "the upstream requires a scope the grant already asked for; not asking again",
                extra={"server_id": self.server_id, "scope": required},
            )
            return ScopeChallenge(required, None)
        await self._store.want(wanted)
        log.info("the upstream requires a wider scope", extra={"server_id": self.server_id, "scope": wanted})
        return ScopeChallenge(required, wanted)

    async def _refresh(self, grant: UpstreamGrant) -> bool:
        """Refresh ``grant`` and store the result; False when the authorization server refused."""
        try:
            async with self._client() as client:
                fresh = await refreshed(client, grant)
        except TokenRequestFailed as exc:
            self._refused = grant.refresh_token
            log.warning("refreshing the upstream token failed: %s", exc.summary, extra={"server_id": self.server_id})
            return False
        self._keep(fresh)
        if not await self._store.save(fresh):
            # Dropped since it was loaded (its key revoked, its server removed): not used any more.
            self._grant = None
            process_redactor().retire(fresh.secrets())
            log.info("upstream grant dropped since it was loaded; not used again", extra={"server_id": self.server_id})
            return False
        log.info("upstream token refreshed", extra={"server_id": self.server_id})
        return True


async def loaded_grants(store: GrantStore, egress: EgressPolicy, server_id: str, per_user: bool = False) -> GrantKeeper:
    """The grant keeper of ``store``, its grant read.

    Raises:
        AuthorizationNeeded: there is no grant.
    """
    keeper = GrantKeeper(store, egress_client(egress), server_id, per_user=per_user)
    await keeper.load()
    return keeper


def identity(config: Mapping[str, Any]) -> str | None:
    """``shared`` or ``per_user`` for a server registered with ``auth.mode: oauth``; None for any other."""
    auth = upstream_auth(dict(config))
    return auth.identity if auth is not None else None


@dataclass(frozen=True)
class TriedGrant:
    """The access token a connect attempt used (None: there was no grant)."""

    access_token: str | None


async def authorized_since(tried: TriedGrant | None, store: GrantStore) -> bool:
    """Whether a server refused for want of authorization has a new grant since the attempt (the
    callback stored one while it was connecting): read after its ERROR was published, so either this
    sees the new grant or the callback sees the ERROR and connects it."""
    if tried is None:
        return False
    stored = await store.load()
    return stored is not None and stored.access_token != tried.access_token
