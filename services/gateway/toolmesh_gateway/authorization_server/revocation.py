"""Connected apps coming and going: a grant made or ended is an event on the stream (the audit log
records it), and an ended grant leaves this gateway's token cache at once and every other
gateway's as soon as their event feed delivers ``app.disconnected``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
from nats.js import JetStreamContext

from toolmesh.contracts.namespace_events import AppConnected, AppDisconnected
from toolmesh.platform.bus.publishing import publish_event
from toolmesh_gateway.authorization_server import store


class AppRevocations:
    """Publishes grants made and ended; ``forget`` is the authenticator's cache eviction."""

    def __init__(self, db: asyncpg.Pool, js: JetStreamContext, forget: Callable[[str], None]) -> None:
        self._db = db
        self._js = js
        self.forget = forget

    async def connected(self, grant_id: str) -> None:
        """Record a new grant (a code was exchanged)."""
        row = await store.grant(self._db, grant_id)
        if row is None:
            return
        await publish_event(self._js, AppConnected(**_of_grant(row), resource=row["resource"], actor=row["key_name"]))

    async def revoke(
        self, grant_id: str, *, actor: str | None, reason: str, ip_address: str | None = None
    ) -> store.Row | None:
        """End a grant: its tokens are refused from now on. The removed grant, None when there was none."""
        row = await store.delete_grant(self._db, grant_id)
        self.forget(grant_id)
        if row is None:
            return None
        ended = AppDisconnected(**_of_grant(row), reason=reason, actor=actor or row["key_name"], ip_address=ip_address)
        await publish_event(self._js, ended)
        return row


def _of_grant(row: store.Row) -> dict[str, Any]:
    """What both events say of a grant: it, its client, and who consented in which namespace."""
    fields = ("grant_id", "key_id", "client_id", "client_name", "namespace")
    return {name: row[name] for name in fields}
