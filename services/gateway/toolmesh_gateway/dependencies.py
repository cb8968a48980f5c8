"""FastAPI dependencies: the services a route needs, taken from the app's state.

They are ``async`` so FastAPI calls them inline instead of in its thread pool.
"""

from __future__ import annotations

from fastapi import Request

from toolmesh.runtime import Backends
from toolmesh_gateway.auth import Principal
from toolmesh_gateway.server_commands import Caller, ServerCommands


async def backends(request: Request) -> Backends:
    """The process's connections."""
    result: Backends = request.app.state.backends
    return result


async def server_commands(request: Request) -> ServerCommands:
    """The server command service."""
    result: ServerCommands = request.app.state.server_commands
    return result


def caller_of(request: Request, principal: Principal) -> Caller:
    """The actor and address recorded for a write."""
    return Caller(actor=principal.name, ip_address=request.client.host if request.client else None)
