"""FastAPI dependencies: the services a route needs, taken from the app's state.

They are ``async`` so FastAPI calls them inline instead of in its thread pool.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request

from toolmesh.platform.runtime import Backends
from toolmesh_gateway.auth import Caller, Principal
from toolmesh_gateway.catalog import Catalog
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.server_commands import ServerCommands

MAX_OFFSET = 2**31 - 1
"""Larger offsets overflow the database's integer (found by the fuzz run); no list is that long."""
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
Limit = Annotated[int, Query(ge=1, le=1000)]


async def backends(request: Request) -> Backends:
    """The process's connections."""
    result: Backends = request.app.state.backends
    return result


async def server_commands(request: Request) -> ServerCommands:
    """The server command service."""
    result: ServerCommands = request.app.state.server_commands
    return result


async def catalog(request: Request) -> Catalog:
    """The gateway's in-memory catalog."""
    result: Catalog = request.app.state.catalog_feed.catalog
    return result


async def catalog_feed(request: Request) -> CatalogFeed:
    """The gateway's catalog with the stream that feeds it (to catch up on a miss)."""
    result: CatalogFeed = request.app.state.catalog_feed
    return result


async def forwarder(request: Request) -> Forwarder:
    """The service forwarding MCP requests to the owners of servers."""
    result: Forwarder = request.app.state.forwarder
    return result


def caller_of(request: Request, principal: Principal) -> Caller:
    """The principal and address recorded for a write."""
    return Caller(principal, request.client.host if request.client else None, origin=str(request.base_url))
