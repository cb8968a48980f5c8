"""An MCP server that answers a call to an unknown tool with a JSON-RPC error, as many servers do.

MCPServer (and the TypeScript SDK) turn an unknown tool into an ``isError`` result; this peer
raises a protocol error instead (``-32602``), and so does its listed tool ``reject`` (a tool
toolmesh forwards, since it is pinned), so clients' handling of upstream errors is exercised.

    python tests/peers/strict_server.py        (stdio)
"""

from __future__ import annotations

from typing import Any

import mcp_types
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError


class StrictServer(MCPServer[Any]):
    """Unknown tool names, and every call of ``reject``, are protocol errors."""

    async def _handle_call_tool(self, ctx: Any, params: mcp_types.CallToolRequestParams) -> Any:
        if self._tool_manager.get_tool(params.name) is None:
            raise MCPError(mcp_types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        if params.name == "reject":
            raise MCPError(mcp_types.INVALID_PARAMS, "Rejected: this server refuses the call")
        return await super()._handle_call_tool(ctx, params)


def build_server() -> StrictServer:
    """The strict server with its two tools."""
    server = StrictServer(name="strict")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def reject() -> str:
        """Refused with a protocol error (never answers)."""
        return "unreachable"

    return server


if __name__ == "__main__":
    build_server().run("stdio")
