"""The gateway's FastAPI application, built around connections opened by the caller."""

from __future__ import annotations

import time

from fastapi import FastAPI

from toolmesh.bus.topology import names_bucket
from toolmesh.credentials import CredentialBox
from toolmesh.runtime import Backends
from toolmesh_gateway.auth import Authenticator
from toolmesh_gateway.errors import install_error_handlers
from toolmesh_gateway.routers import aggregator, servers
from toolmesh_gateway.server_commands import ServerCommands


async def create_app(backends: Backends, box: CredentialBox) -> FastAPI:
    """An app serving ``/api/v1/...`` with OpenAPI at ``/openapi.json``."""
    app = FastAPI(title="toolmesh", version="0.1.0", summary="MCP server aggregator")
    app.state.backends = backends
    app.state.started_at = time.monotonic()
    app.state.authenticator = Authenticator(backends.db)
    app.state.server_commands = ServerCommands(backends, await names_bucket(backends.js), box)
    install_error_handlers(app)
    app.include_router(servers.router)
    app.include_router(aggregator.router)
    return app
