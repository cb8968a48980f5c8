"""What a REST tool server's answers mean (the connection API spec's REST protocol): a JSON body, and
an answer to ``POST /tools/execute`` as an MCP tool result or the spec's exception (no I/O)."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from toolmesh_session_worker.upstream.translation import (
    MCPProtocolError,
    ToolExecutionError,
    as_error,
    failure_to_mcp,
    is_error_object,
    mcp_error_to_exception,
    result_to_mcp,
)


def answer_json(response: httpx2.Response) -> Any:
    """The JSON body of ``response``; ``MCPProtocolError`` when it is not JSON."""
    try:
        return json.loads(response.content)
    except ValueError as exc:
        raise MCPProtocolError(f"HTTP {response.status_code} answer is not JSON") from exc


def execution_result(response: httpx2.Response, server_name: str, tool: str) -> dict[str, Any]:
    """The MCP result of an answer (other than 404) to ``POST /tools/execute``: 200 is the result (an
    error object ``TOOL_EXECUTION_FAILED`` is a tool error, ``isError``); anything else raises the
    spec's exception (``as_error``)."""
    try:
        answer = answer_json(response)
        if response.status_code != 200:
            raise _non_200(response.status_code, answer, tool)
        if is_error_object(answer):
            raise mcp_error_to_exception(answer, tool)
    except ToolExecutionError as exc:
        if response.status_code == 200:
            return failure_to_mcp(exc)
        raise as_error(exc, server_name, tool) from exc
    except MCPProtocolError as exc:
        raise as_error(exc, server_name, tool) from exc
    return result_to_mcp(answer)


def _non_200(status: int, answer: Any, tool: str) -> Exception:
    """The spec's exception for a non-200, non-404 answer to ``POST /tools/execute``."""
    if is_error_object(answer):
        problem = mcp_error_to_exception(answer, tool)
        if isinstance(problem, ToolExecutionError):
            return problem
        return MCPProtocolError(f"HTTP {status}: {problem}", problem.details)
    return MCPProtocolError(f"POST /tools/execute answered HTTP {status}", {"http_status": status})
