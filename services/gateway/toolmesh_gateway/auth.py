"""Bearer authentication: API keys are looked up hashed in the database, never trusted from claims."""

from __future__ import annotations

import time
from dataclasses import dataclass

import asyncpg
from fastapi import Request

from toolmesh.credentials import hash_token
from toolmesh.errors import Unauthorized
from toolmesh.store.queries import principal_for_token_hash

_CACHE_SECONDS = 30.0


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its role and namespace come from the database."""

    name: str
    role: str
    namespace: str


class Authenticator:
    """Resolves bearer tokens to principals, caching hits briefly."""

    def __init__(self, db: asyncpg.Pool) -> None:
        self._db = db
        self._cache: dict[str, tuple[float, Principal]] = {}

    async def principal(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header; ``Unauthorized`` otherwise."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Missing bearer token")
        digest = hash_token(token.strip())
        cached = self._cache.get(digest)
        if cached and cached[0] > time.monotonic():
            return cached[1]
        row = await principal_for_token_hash(self._db, digest)
        if row is None:
            raise Unauthorized("Invalid bearer token")
        principal = Principal(name=row["name"], role=row["role"], namespace=row["namespace"])
        self._cache[digest] = (time.monotonic() + _CACHE_SECONDS, principal)
        return principal


async def require_principal(request: Request) -> Principal:
    """FastAPI dependency guarding every endpoint."""
    authenticator: Authenticator = request.app.state.authenticator
    return await authenticator.principal(request.headers.get("authorization"))
