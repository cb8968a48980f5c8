"""Authorizations in progress: ``state`` -> what the callback needs, in the NATS KV bucket
``toolmesh_oauth_flows`` (a short TTL), so the browser may come back to any gateway replica.

A flow is sealed with the credential key (it holds the PKCE verifier and perhaps a client secret)
and stored under a hash of its ``state``; taking it deletes it at the revision read, so a state is
used at most once, even by two replicas at the same moment.
"""

from __future__ import annotations

import hashlib

from nats.js.errors import BadRequestError, KeyDeletedError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue
from pydantic import BaseModel

from toolmesh.credentials import CredentialBox
from toolmesh.platform.bus.leases import WRONG_LAST_SEQUENCE
from toolmesh.platform.store.upstream_tokens import SHARED_IDENTITY

FLOW_TTL_SECONDS = 600.0
"""How long an authorization URL may wait for the user (the bucket's TTL)."""


class PendingFlow(BaseModel):
    """One authorization started by ``POST /servers/{id}/authorize``."""

    server_id: str
    namespace: str
    actor: str
    redirect_uri: str
    code_verifier: str
    issuer: str
    iss_required: bool
    """The authorization server promised ``iss`` in its answer (RFC 9207)."""
    token_endpoint: str
    client_id: str
    client_secret: str | None = None
    auth_method: str = "none"
    resource: str
    scope: str | None = None
    principal: str = SHARED_IDENTITY
    """Whose grant the callback stores: the authorizing key's for a per-user server."""


def _key(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


class FlowStore:
    """The pending flows of every replica."""

    def __init__(self, kv: KeyValue, box: CredentialBox) -> None:
        self._kv = kv
        self._box = box

    async def put(self, state: str, flow: PendingFlow) -> None:
        """Keep ``flow`` until its callback (or the bucket's TTL)."""
        await self._kv.create(_key(state), self._box.seal(flow.model_dump()).encode())

    async def take(self, state: str) -> PendingFlow | None:
        """The flow of ``state``, removed; None when it is unknown, expired or already taken."""
        key = _key(state)
        try:
            entry = await self._kv.get(key)
            await self._kv.delete(key, last=entry.revision)
        except (KeyNotFoundError, KeyDeletedError, KeyWrongLastSequenceError):
            return None
        except BadRequestError as exc:  # nats-py leaves a delete's "wrong last sequence" untranslated
            if exc.err_code != WRONG_LAST_SEQUENCE:
                raise
            return None  # another callback took it first
        if entry.value is None:
            return None
        return PendingFlow.model_validate(self._box.open(entry.value.decode()))
