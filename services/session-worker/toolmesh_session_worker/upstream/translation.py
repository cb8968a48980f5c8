"""Protocol translation for REST tool servers (the connection API spec's ``MCPProtocolTranslator``).

Pure functions between the wire format of a REST tool server (``GET /tools``,
``POST /tools/execute``, error objects) and toolmesh's own: tools become ``DiscoveredTool``
(with their category), results become MCP ``CallToolResult`` wire dicts, error objects become the
spec's exceptions, and those map onto toolmesh's error table (``as_error``). No I/O.

A tool list is translated whole or not at all: the first malformed tool rejects the list with a
protocol error naming what is wrong, so nothing half-registered is kept.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from toolmesh.contracts.events import DiscoveredTool
from toolmesh.errors import ExecutionFailed, ServerUnavailable, ToolmeshError, ToolNotFound

TOOL_EXECUTION_FAILED = "TOOL_EXECUTION_FAILED"


class MCPConnectionError(Exception):
    """The server could not be reached (or answered its health check with a failure)."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


class MCPProtocolError(Exception):
    """The server broke the protocol: a malformed tool list, error object or answer."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


class MCPToolNotFoundError(Exception):
    """The server does not have the tool (HTTP 404); ``available_tools`` when known."""

    def __init__(self, tool_name: str, available_tools: list[str] | None = None) -> None:
        message = f"Tool not found: {tool_name}"
        if available_tools:
            message += f"\nAvailable tools: {', '.join(available_tools)}"
        super().__init__(message)
        self.tool_name = tool_name
        self.available_tools = available_tools or []


class ToolExecutionError(Exception):
    """The server ran the tool and it failed (error code ``TOOL_EXECUTION_FAILED``)."""

    def __init__(self, tool_name: str, error_message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"Tool execution failed ({tool_name}): {error_message}")
        self.tool_name = tool_name
        self.error_message = error_message
        self.details = details or {}


def _field(tool: dict[str, Any], name: str, where: str) -> str:
    value = tool.get(name)
    if value is None:
        raise MCPProtocolError(f"{where} has no '{name}'", {"field": name, "where": where})
    if not isinstance(value, str) or not value.strip():
        raise MCPProtocolError(f"{where}: '{name}' must be a non-empty string", {"field": name, "where": where})
    return value


def mcp_tool_to_domain(mcp_tool: Any, where: str = "tool") -> DiscoveredTool:
    """One tool of a tool list (``name`` and ``description`` required, ``inputSchema`` optional),
    with its inferred category; ``MCPProtocolError`` naming the problem otherwise."""
    if not isinstance(mcp_tool, dict):
        raise MCPProtocolError(f"{where} must be an object, not {type(mcp_tool).__name__}", {"where": where})
    name = _field(mcp_tool, "name", where)
    where = f"{where} '{name}'"
    description = _field(mcp_tool, "description", where)
    schema = mcp_tool.get("inputSchema")
    if schema is None:
        schema = {"type": "object"}
    elif not isinstance(schema, dict):
        raise MCPProtocolError(f"{where}: 'inputSchema' must be an object", {"field": "inputSchema", "where": where})
    elif schema.get("type", "object") != "object":
        raise MCPProtocolError(
            f"{where}: 'inputSchema' must describe an object (type 'object'), not {schema.get('type')!r}",
            {"field": "inputSchema", "where": where},
        )
    return DiscoveredTool(original_name=name, description=description, input_schema={"type": "object", **schema})


def mcp_tools_response_to_domain(mcp_response: Any) -> list[DiscoveredTool]:
    """Every tool of a ``GET /tools`` answer (``{"tools": [...]}``), or ``MCPProtocolError`` for the
    first thing wrong with it; never a part of the list."""
    if not isinstance(mcp_response, dict):
        raise MCPProtocolError("the tool list must be a JSON object with a 'tools' list", {"field": "tools"})
    if "tools" not in mcp_response:
        raise MCPProtocolError("the tool list has no 'tools' field", {"field": "tools"})
    tools = mcp_response["tools"]
    if not isinstance(tools, list):
        raise MCPProtocolError(f"'tools' must be a list, not {type(tools).__name__}", {"field": "tools"})
    return [mcp_tool_to_domain(tool, f"tools[{index}]") for index, tool in enumerate(tools)]


def domain_tool_to_mcp(tool: DiscoveredTool) -> dict[str, Any]:
    """A tool as MCP's ``tools/list`` spells it."""
    return {"name": tool.original_name, "description": tool.description, "inputSchema": tool.input_schema}


def domain_tool_execution_to_mcp(tool_name: str, tool_args: dict[str, Any]) -> dict[str, Any]:
    """The ``POST /tools/execute`` body: ``tool``, ``arguments`` and a fresh ``requestId`` (UUID4)."""
    return {"tool": tool_name, "arguments": tool_args, "requestId": str(uuid.uuid4())}


def is_error_object(answer: Any) -> bool:
    """True when an answer is an error object (``{"error": {...}}``) rather than a result."""
    return isinstance(answer, dict) and isinstance(answer.get("error"), dict) and len(answer) == 1


def mcp_error_to_exception(mcp_error: Any, tool_name: str | None = None) -> ToolExecutionError | MCPProtocolError:
    """The spec's exception for an error object ``{"error": {"code", "message", "details"}}``:
    ``ToolExecutionError`` for ``TOOL_EXECUTION_FAILED`` (naming ``details.tool``, else ``tool_name``),
    ``MCPProtocolError`` for any other code. Raises ``MCPProtocolError`` when the object is malformed."""
    error = mcp_error.get("error") if isinstance(mcp_error, dict) else None
    if not isinstance(error, dict):
        raise MCPProtocolError("the error answer has no 'error' object", {"answer": _excerpt(mcp_error)})
    code, message = error.get("code"), error.get("message")
    if not isinstance(code, str) or not isinstance(message, str):
        raise MCPProtocolError("the error object needs a string 'code' and 'message'", {"error": _excerpt(error)})
    given = error.get("details")
    details: dict[str, Any] = given if isinstance(given, dict) else {}
    if code == TOOL_EXECUTION_FAILED:
        named = details.get("tool")
        return ToolExecutionError(named if isinstance(named, str) else tool_name or "unknown", message, details)
    return MCPProtocolError(f"{code}: {message}", {"code": code, **details})


def result_to_mcp(result: Any) -> dict[str, Any]:
    """A tool's JSON result as an MCP ``CallToolResult``: the JSON as text content, and as
    ``structuredContent`` when it is an object."""
    wire: dict[str, Any] = {"content": [{"type": "text", "text": json.dumps(result)}], "isError": False}
    if isinstance(result, dict):
        wire["structuredContent"] = result
    return wire


def failure_to_mcp(exc: ToolExecutionError) -> dict[str, Any]:
    """A failure the server reported for a tool it ran, as an MCP tool error the model can read."""
    return {"content": [{"type": "text", "text": str(exc)}], "isError": True}


def as_error(exc: Exception, server_name: str, tool: str | None = None) -> ToolmeshError:
    """toolmesh's error (the one table) for one of the spec's exceptions."""
    context: dict[str, Any] = {"server": server_name}
    if tool is not None:
        context["tool"] = tool
    if isinstance(exc, MCPToolNotFoundError):
        return ToolNotFound(f"{server_name}: {exc}", {**context, "available": exc.available_tools})
    if isinstance(exc, ToolExecutionError):
        return ExecutionFailed(f"{server_name}: {exc}", {**context, "tool": exc.tool_name, "details": exc.details})
    if isinstance(exc, MCPProtocolError):
        return ExecutionFailed(f"{server_name}: protocol error: {exc}", {**context, **exc.details})
    return ServerUnavailable(f"Server unavailable: {server_name}: {exc}", context)


def _excerpt(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."
