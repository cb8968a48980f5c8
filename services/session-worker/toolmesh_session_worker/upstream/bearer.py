"""``Authorization: Bearer`` for an upstream authorized by OAuth: the access token on every request,
and one more try with a renewed token when the upstream answers 401 (noted for the request when
there is none, or it is refused too); a 403 ``insufficient_scope``
is tried once more only with a grant authorized since (a refresh would not widen its scope), else
noted for the request (``challenges``)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol

import httpx2

from toolmesh_session_worker.upstream.challenges import (
    REFUSED,
    ScopeChallenge,
    insufficient_scope,
    note,
    required_scope,
)


class Grants(Protocol):
    """Where a session takes its access token (``toolmesh_session_worker.upstream_grants``)."""

    async def access_token(self) -> str | None:
        """The access token to send, refreshed first when it is about to expire; None without one."""
        ...

    async def renewed(self, refused: str) -> str | None:
        """Another access token than ``refused`` (stored anew, or refreshed); None when there is none."""
        ...

    async def stored_since(self, refused: str) -> str | None:
        """Another access token than ``refused`` stored since (a new authorization); never a refresh."""
        ...

    async def challenged(self, required: str | None) -> ScopeChallenge:
        """What the grant makes of a scope challenge requiring ``required`` (see ``ScopeChallenge``)."""
        ...


class BearerAuth(httpx2.Auth):
    """Sends the grant's access token; on a 401, retries once with a renewed one; on a scope challenge,
    once with a grant authorized since, if any."""

    def __init__(self, grants: Grants) -> None:
        self._grants = grants

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self._grants.access_token()
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if token is None:
            return
        if response.status_code == 401:
            renewed = await self._grants.renewed(token)
            if renewed is not None:
                request.headers["Authorization"] = f"Bearer {renewed}"
                response = yield request
            if renewed is None or response.status_code == 401:
                note(REFUSED)
            return
        if not insufficient_scope(response):
            return
        newer = await self._grants.stored_since(token)
        if newer is not None:
            request.headers["Authorization"] = f"Bearer {newer}"
            response = yield request
            if not insufficient_scope(response):
                return
        note(await self._grants.challenged(required_scope(response)))
