"""Building the front door of a gateway app and mounting it at ``/mcp``."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.routing import Route

from toolmesh.runtime import Backends
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.front_door.server import FrontDoor
from toolmesh_gateway.tool_calls import ToolCalls

MCP_PATH = "/mcp"


async def mount_front_door(app: FastAPI, backends: Backends, feed: CatalogFeed, calls: ToolCalls) -> FrontDoor:
    """Start the MCP server on the app's authenticator, catalog feed (started), tool calls and search
    service; serve it at ``/mcp``."""
    front = FrontDoor(
        backends.settings,
        app.state.authenticator,
        feed,
        calls,
        app.state.search,
    )
    await front.start()
    app.router.routes.append(Route(MCP_PATH, front, include_in_schema=False))  # an ASGI app: every method
    return front
