"""toolmesh errors as JSON-RPC errors with the spec's codes; an upstream's own error passes through."""

from __future__ import annotations

import mcp_types
from mcp.shared.exceptions import MCPError

from toolmesh.errors import (
    ExecutionTimeout,
    PromptAmbiguous,
    PromptChanged,
    PromptNotFound,
    ResourceNotFound,
    ServerNotFound,
    ToolAmbiguous,
    ToolmeshError,
    ToolNotFound,
)

RESOURCE_NOT_FOUND = -32002
"""The spec's code for a resource nobody serves."""
REQUEST_TIMEOUT = -32001
_INVALID_PARAMS = (ServerNotFound, ToolNotFound, ToolAmbiguous, PromptNotFound, PromptAmbiguous, PromptChanged)


def mcp_error(exc: ToolmeshError) -> MCPError:
    """The JSON-RPC error a client sees for ``exc`` (``data`` carries toolmesh's error body)."""
    upstream = exc.extra.get("upstream_error")
    if isinstance(upstream, dict) and isinstance(upstream.get("code"), int):
        return MCPError(
            code=upstream["code"], message=str(upstream.get("message", exc.detail)), data=upstream.get("data")
        )
    if isinstance(exc, ResourceNotFound):
        code = RESOURCE_NOT_FOUND
    elif isinstance(exc, _INVALID_PARAMS):
        code = mcp_types.INVALID_PARAMS
    elif isinstance(exc, ExecutionTimeout):
        code = REQUEST_TIMEOUT
    else:
        code = mcp_types.INTERNAL_ERROR
    return MCPError(code=code, message=exc.detail, data=exc.body())
