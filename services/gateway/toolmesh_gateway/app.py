"""The gateway's FastAPI application, built around connections opened by the caller."""

from __future__ import annotations

import time

from fastapi import FastAPI

from toolmesh.bus.topology import names_bucket
from toolmesh.credentials import CredentialBox
from toolmesh.runtime import Backends
from toolmesh.search.setup import build_search
from toolmesh_gateway import observability
from toolmesh_gateway.auth import Authenticator
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.errors import install_error_handlers
from toolmesh_gateway.front_door.mount import mount_front_door
from toolmesh_gateway.routers import aggregator, search, servers, tools
from toolmesh_gateway.server_commands import ServerCommands
from toolmesh_gateway.tool_calls import ToolCalls


async def create_app(backends: Backends, box: CredentialBox) -> FastAPI:
    """An app serving ``/api/v1/...`` with OpenAPI at ``/openapi.json``."""
    app = FastAPI(title="toolmesh", version="0.1.0", summary="MCP server aggregator")
    app.state.backends = backends
    app.state.started_at = time.monotonic()
    app.state.authenticator = Authenticator(backends.db)
    app.state.server_commands = ServerCommands(backends, await names_bucket(backends.js), box)
    feed = CatalogFeed(backends.js, backends.db)
    await feed.start()
    app.state.catalog_feed = feed
    app.state.tool_calls = ToolCalls(backends.nc, backends.js, feed, backends.settings)
    app.state.search = await build_search(backends.settings, backends.db)
    install_error_handlers(app)
    app.add_middleware(observability.TracingMiddleware)
    app.include_router(observability.router)
    app.include_router(servers.router)
    app.include_router(aggregator.router)
    app.include_router(aggregator.probes)
    app.include_router(tools.router)
    app.include_router(search.router)
    app.state.mcp = await mount_front_door(app, backends, feed, app.state.tool_calls)
    return app


async def close_app(app: FastAPI) -> None:
    """Release what ``create_app`` opened (the front door, then the catalog feed's subscription)."""
    await app.state.mcp.close()
    await app.state.catalog_feed.close()
