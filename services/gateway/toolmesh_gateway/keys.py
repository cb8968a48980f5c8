"""API key management: create (the token is shown once), list, revoke — inside the caller's namespace."""

from __future__ import annotations

import secrets
import uuid

from toolmesh.contracts.keys import KEY_TOKEN_PREFIX, CreatedKey, CreateKeyRequest, KeyInfo, KeyList, Role
from toolmesh.contracts.namespace_events import KeyCreated, KeyRevoked
from toolmesh.credentials import hash_token
from toolmesh.errors import Forbidden, KeyAlreadyExists, KeyNotFound
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store import principals
from toolmesh.platform.store.upstream_tokens import drop_principal_grants
from toolmesh_gateway.auth import Authenticator, Caller, Principal


def new_token() -> str:
    """A fresh API key (256 random bits)."""
    return KEY_TOKEN_PREFIX + secrets.token_urlsafe(32)


class KeyService:
    """Keys of principals; owners manage every namespace, admins their own (never owner keys)."""

    def __init__(self, backends: Backends, authenticator: Authenticator) -> None:
        self._b = backends
        self._auth = authenticator

    async def create(self, request: CreateKeyRequest, principal: Principal, caller: Caller) -> CreatedKey:
        """Create a key; only an owner creates owners or keys of another namespace."""
        principal.require_manager("create keys")
        namespace = principal.home(request.namespace)
        if request.role is Role.OWNER and principal.role is not Role.OWNER:
            raise Forbidden("Only the owner may create owner keys", {"role": str(request.role)})
        token = new_token()
        row = await principals.insert_key(
            self._b.db,
            key_id=str(uuid.uuid4()),
            name=request.name,
            token_hash=hash_token(token),
            role=str(request.role),
            namespace=namespace,
            created_by=principal.name,
            endpoints=request.endpoints,
        )
        if row is None:
            raise KeyAlreadyExists(
                f"Key already exists: {request.name}", {"name": request.name, "namespace": namespace}
            )
        await publish_event(
            self._b.js,
            KeyCreated(
                key_id=row["id"],
                name=row["name"],
                role=row["role"],
                namespace=namespace,
                actor=caller.actor,
                ip_address=caller.ip_address,
            ),
        )
        return CreatedKey(token=token, **_info(row).model_dump())

    async def list(self, principal: Principal) -> KeyList:
        """Keys the caller may manage."""
        principal.require_manager("list keys")
        rows = await principals.list_keys(self._b.db, principal.scope, include_owners=principal.role is Role.OWNER)
        return KeyList(keys=[_info(r) for r in rows], total=len(rows))

    async def revoke(self, key_id: str, principal: Principal, caller: Caller) -> None:
        """Delete a key and the upstream grants it authorized for itself (per-user servers); every
        gateway refuses it once the ``key.revoked`` event reaches it."""
        principal.require_manager("revoke keys")
        row = await principals.delete_key(
            self._b.db, key_id, principal.scope, include_owners=principal.role is Role.OWNER
        )
        if row is None:
            raise KeyNotFound(f"Key not found: {key_id}", {"key_id": key_id})
        self._auth.forget(row["id"])
        await drop_principal_grants(self._b.db, row["id"])  # its upstream accounts are no longer its to use
        await publish_event(
            self._b.js,
            KeyRevoked(
                key_id=row["id"],
                name=row["name"],
                role=row["role"],
                namespace=row["namespace"],
                actor=caller.actor,
                ip_address=caller.ip_address,
            ),
        )


def _info(row: principals.Row) -> KeyInfo:
    return KeyInfo(
        id=row["id"],
        name=row["name"],
        role=Role(row["role"]),
        namespace=row["namespace"],
        created_at=row["created_at"],
        created_by=row["created_by"],
        endpoints=list(row["endpoints"]) if row["endpoints"] is not None else None,
    )
