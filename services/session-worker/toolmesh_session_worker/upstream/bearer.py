"""``Authorization: Bearer`` for an upstream authorized by OAuth: the access token on every request,
and one more try with a renewed token when the upstream answers 401."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol

import httpx2


class Grants(Protocol):
    """Where a session takes its access token (``toolmesh_session_worker.upstream_grants``)."""

    async def access_token(self) -> str | None:
        """The access token to send, refreshed first when it is about to expire; None without one."""
        ...

    async def renewed(self, refused: str) -> str | None:
        """Another access token than ``refused`` (stored anew, or refreshed); None when there is none."""
        ...


class BearerAuth(httpx2.Auth):
    """Sends the grant's access token; on a 401, retries once with a renewed one."""

    def __init__(self, grants: Grants) -> None:
        self._grants = grants

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self._grants.access_token()
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401 or token is None:
            return
        renewed = await self._grants.renewed(token)
        if renewed is not None:
            request.headers["Authorization"] = f"Bearer {renewed}"
            yield request
