"""``/mcp/{name}``: an endpoint (bundle) of the caller's namespace, else a server served unchanged.

An endpoint's name shadows a server's of the same name (creating an endpoint refuses names of
servers). A key limited to endpoints may use only those; every other path answers 403.
"""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from toolmesh.errors import Forbidden, ToolmeshError
from toolmesh_gateway.auth import Authenticator
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.front_door.server import FrontDoor
from toolmesh_gateway.front_door.sessions import authenticate, refuse
from toolmesh_gateway.front_door.transparent import Transparent
from toolmesh_gateway.rate_limit import RateLimiter


class NamedEndpoints:
    """The ASGI app of ``/mcp/{name}``."""

    def __init__(
        self,
        authenticator: Authenticator,
        limiter: RateLimiter,
        feed: CatalogFeed,
        front: FrontDoor,
        transparent: Transparent,
    ) -> None:
        self._auth = authenticator
        self._limiter = limiter
        self._feed = feed
        self._front = front
        self._transparent = transparent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Authenticate, then serve the endpoint or the server the path names."""
        if scope["type"] != "http":
            return
        name = str(scope.get("path_params", {}).get("name", ""))
        try:
            caller = await authenticate(self._auth, self._limiter, scope)
            allowed = caller.principal.endpoints
            bundle = self._feed.catalog.bundle(str(caller.scope), name)
            if allowed is not None and (bundle is None or name not in allowed):
                raise Forbidden(
                    f"This key may not use /mcp/{name}; its endpoints: {', '.join(sorted(allowed)) or '(none)'}",
                    {"endpoints": sorted(allowed)},
                )
        except ToolmeshError as exc:
            await refuse(exc, scope, receive, send)
            return
        if bundle is not None:
            await self._front.serve(scope, receive, send, caller, bundle)
        else:
            await self._transparent.serve(scope, receive, send, caller, name)
