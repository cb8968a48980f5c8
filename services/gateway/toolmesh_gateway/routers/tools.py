"""``/api/v1/tools``: tool execution (``POST /call``)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.tools import ToolCallRequest, ToolCallResponse
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import caller_of
from toolmesh_gateway.tool_calls import CallAbandoned, ToolCalls

router = APIRouter(prefix="/api/v1/tools", tags=["tools"])
Auth = Annotated[Principal, Depends(require_principal)]
CLIENT_CLOSED = 499
"""Status logged for a call whose client disconnected (nobody reads it)."""
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (400, 404, 409, 429, 502, 503, 504)}


async def tool_calls(request: Request) -> ToolCalls:
    """The tool call service (async: FastAPI runs a sync dependency in its thread pool)."""
    result: ToolCalls = request.app.state.tool_calls
    return result


Calls = Annotated[ToolCalls, Depends(tool_calls)]


async def _disconnected(request: Request) -> None:
    """Complete when the client goes away (the body is already read, so the next message says so)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


@router.post("/call", response_model=ToolCallResponse, responses=ERRORS)
async def call_tool(body: ToolCallRequest, request: Request, principal: Auth, calls: Calls) -> Response:
    """Execute a tool on the caller's server that has it (BR-005); cancelled upstream if the client leaves.
    Under a durable quota, ``X-RateLimit-Limit``/``-Remaining``/``-Reset`` tell the tightest one's state."""
    headers: dict[str, str] = {}
    try:
        result = await calls.call(
            body,
            caller_of(request, principal),
            abandoned=lambda: _disconnected(request),
            standing=lambda left: headers.update(left.headers()),
        )
    except CallAbandoned:
        return Response(status_code=CLIENT_CLOSED)
    return Response(json.dumps(result, separators=(",", ":")).encode(), media_type="application/json", headers=headers)
