"""The OAuth grant of a server authorized in shared identity, as its upstream sessions use it: the
access token, refreshed before it expires and once when the upstream refuses it, and the refreshed
tokens stored sealed again (``toolmesh.platform.store.upstream_tokens``).

An upstream registered with ``auth.mode: oauth`` that has no grant, or whose grant can no longer be
refreshed, waits in ERROR with ``NEEDS_AUTHORIZATION`` (no automatic retry) until an owner or admin
authorizes it; the callback then connects it.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg
import httpx2

from toolmesh.credentials import CredentialBox
from toolmesh.egress.http import guarded_client
from toolmesh.egress.policy import EgressPolicy
from toolmesh.oauth_tokens import TokenRequestFailed, refreshed
from toolmesh.platform.store.upstream_tokens import UpstreamGrant, load_grant, save_grant
from toolmesh.redaction import process_redactor
from toolmesh_session_worker.upstream import UpstreamRefused

log = logging.getLogger("toolmesh.session")
REFRESH_MARGIN_SECONDS = 60.0
"""An access token this close to its expiry is refreshed before it is sent."""
_LIMITS = httpx2.Limits(max_connections=4, max_keepalive_connections=0)


def needs_authorization(server_id: str) -> str:
    """The ``error_message`` of a server waiting for an owner or admin to authorize it."""
    return (
        "needs authorization: the upstream's OAuth grant is missing or can no longer be refreshed; an owner or "
        f"admin authorizes it with POST /api/v1/aggregator/servers/{server_id}/authorize"
    )


class AuthorizationNeeded(UpstreamRefused):
    """The server has no usable grant: connecting cannot succeed until someone authorizes it."""

    def __init__(self, server_id: str) -> None:
        words = needs_authorization(server_id)
        super().__init__(words, summary=words)


class GrantKeeper:
    """The shared-identity grant of one server, for its sessions (``upstream.bearer.Grants``)."""

    def __init__(self, db: asyncpg.Pool, box: CredentialBox, server_id: str, egress: EgressPolicy) -> None:
        self._db = db
        self._box = box
        self.server_id = server_id
        self._egress = egress
        self._grant: UpstreamGrant | None = None
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the stored grant.

        Raises:
            AuthorizationNeeded: the server was never authorized.
        """
        grant = await load_grant(self._db, self._box, self.server_id)
        if grant is None:
            raise AuthorizationNeeded(self.server_id)
        self._keep(grant)

    def _keep(self, grant: UpstreamGrant) -> None:
        process_redactor().add(grant.secrets())
        self._grant = grant

    async def access_token(self) -> str | None:
        """The access token, refreshed first when it expires within ``REFRESH_MARGIN_SECONDS``."""
        grant = self._grant
        if grant is not None and grant.refresh_token and grant.expires_within(REFRESH_MARGIN_SECONDS):
            async with self._lock:
                if self._grant is grant:
                    await self._refresh(grant)
        return self._grant.access_token if self._grant is not None else None

    async def renewed(self, refused: str) -> str | None:
        """Another access token than ``refused``: one stored since (a new authorization), else a refreshed one."""
        async with self._lock:
            if self._grant is not None and self._grant.access_token != refused:
                return self._grant.access_token
            stored = await load_grant(self._db, self._box, self.server_id)
            if stored is not None and stored.access_token != refused:
                self._keep(stored)
                return stored.access_token
            if stored is None or not await self._refresh(stored):
                return None
            return self._grant.access_token if self._grant is not None else None

    async def _refresh(self, grant: UpstreamGrant) -> bool:
        """Refresh ``grant`` and store the result; False when the authorization server refused."""
        try:
            async with guarded_client(self._egress, _LIMITS, follow_redirects=False) as client:
                fresh = await refreshed(client, grant)
        except TokenRequestFailed as exc:
            log.warning("refreshing the upstream token failed: %s", exc.summary, extra={"server_id": self.server_id})
            return False
        self._keep(fresh)
        await save_grant(self._db, self._box, self.server_id, fresh)
        log.info("upstream token refreshed", extra={"server_id": self.server_id})
        return True
