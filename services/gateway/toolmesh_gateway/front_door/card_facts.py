"""Who may read an endpoint's Server Card and what it says: exactly who may use the endpoint.

A card request is authenticated as a request of the endpoint it describes (the same bearer auth, an
OAuth token only for its own endpoint, the rate limit, ``?namespace=`` for the owner), and the name is
looked up as ``/mcp/{name}`` looks it up: a bundle of the caller's namespace, else one of its servers.
So a reader learns of an endpoint only what the endpoint itself would tell it: 401 without a valid
token, 403 for a key limited to other endpoints, 404 for a name its namespace does not have.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import urlencode

from mcp.server.lowlevel import Server
from mcp_types.version import LATEST_MODERN_VERSION
from starlette.requests import Request

from toolmesh.errors import Forbidden, ServerNotFound
from toolmesh_gateway import lookup
from toolmesh_gateway.auth import Authenticator, Caller
from toolmesh_gateway.authorization_server.addresses import MCP_PATH
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.endpoints import EndpointService
from toolmesh_gateway.front_door.server_cards import EndpointFacts
from toolmesh_gateway.front_door.sessions import authenticate
from toolmesh_gateway.rate_limit import RateLimiter


class CardFacts:
    """The facts of the endpoints a caller may use, read from the front door's servers and the catalog."""

    def __init__(
        self,
        authenticator: Authenticator,
        limiter: RateLimiter,
        feed: CatalogFeed,
        endpoints: EndpointService,
        aggregate: Server[Any],
        transparent: Server[Any],
    ) -> None:
        self._auth = authenticator
        self._limiter = limiter
        self._feed = feed
        self._endpoints = endpoints
        self._aggregate = aggregate
        self._transparent = transparent

    async def caller(self, request: Request, path: str) -> Caller:
        """The caller of a request about the endpoint at ``path``, authenticated as a request of it."""
        return await authenticate(self._auth, self._limiter, {**request.scope, "path": path})

    def aggregate(self, caller: Caller) -> EndpointFacts:
        """``/mcp``; ``Forbidden`` for a key limited to endpoints."""
        caller.principal.require_aggregate_access()
        return _at(caller, self._bundled(MCP_PATH, "aggregate", "toolmesh", self._aggregate.instructions or ""))

    def named(self, caller: Caller, name: str) -> EndpointFacts:
        """``/mcp/{name}`` (``_named``), at the caller's namespace."""
        return _at(caller, self._named(caller, name))

    def _named(self, caller: Caller, name: str) -> EndpointFacts:
        """``/mcp/{name}``: the caller's bundle of that name, else its server; ``Forbidden`` for a key
        limited to other endpoints, ``ServerNotFound`` when its namespace has neither."""
        allowed = caller.principal.endpoints
        bundle = self._feed.catalog.bundle(str(caller.scope), name)
        if allowed is not None and (bundle is None or name not in allowed):
            raise Forbidden(
                f"This key may not use /mcp/{name}; its endpoints: {', '.join(sorted(allowed)) or '(none)'}",
                {"endpoints": sorted(allowed)},
            )
        if bundle is not None:
            return self._bundled(
                f"{MCP_PATH}/{name}", "endpoint", name, bundle.description or f"toolmesh endpoint {name}"
            )
        server = lookup.server_by_name(self._feed.catalog.view(caller.scope), name)
        if server is None:
            raise ServerNotFound(f"Server not found: {name}", {"server_name": name})
        described = self._feed.catalog.offer(server.id).description
        version = described.server_info.get("version")
        capabilities: dict[str, Any] = {}
        if described.protocol_version is not None:  # as transparent.Transparent answers server/discover
            extensions = {**(described.capabilities.get("extensions") or {}), **self._transparent.extensions}
            capabilities = {**described.capabilities, "extensions": extensions}
        return EndpointFacts(
            f"{MCP_PATH}/{name}",
            "server",
            name,
            f"MCP server {name}, served unchanged by toolmesh",
            version if isinstance(version, str) else "",  # what its serverInfo says, however odd
            capabilities,
        )

    async def listed(self, caller: Caller) -> list[EndpointFacts]:
        """Every endpoint the caller may use: the aggregate, its namespace's bundles, then its servers
        (bundles only, for a key limited to endpoints)."""
        allowed = caller.principal.endpoints
        found = [] if allowed is not None else [self.aggregate(caller)]
        bundles = sorted(e.name for e in (await self._endpoints.list(caller)).endpoints)
        names = [n for n in bundles if allowed is None or n in allowed]
        if allowed is None:
            names += [s.name for s in self._feed.catalog.view(caller.scope).servers() if s.name not in bundles]
        for name in names:
            try:
                found.append(self.named(caller, name))
            except ServerNotFound:  # a bundle not in the catalog yet, or a name several servers share
                continue
        return found

    def _bundled(self, path: str, kind: str, title: str, description: str) -> EndpointFacts:
        """An endpoint of the aggregate's server: its version and ``server/discover`` capabilities."""
        capabilities = self._aggregate.get_capabilities(protocol_version=LATEST_MODERN_VERSION)
        return EndpointFacts(
            path,
            kind,
            title,
            description,
            self._aggregate.version or "",
            capabilities.model_dump(by_alias=True, mode="json", exclude_none=True),
        )


def _at(caller: Caller, facts: EndpointFacts) -> EndpointFacts:
    """``facts`` with the ``?namespace=`` the owner names another namespace than its own with."""
    if caller.namespace is None or caller.namespace == caller.principal.namespace:
        return facts
    return dataclasses.replace(facts, query="?" + urlencode({"namespace": caller.namespace}))
