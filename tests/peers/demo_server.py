"""A real MCP server for tests, over stdio, SSE or Streamable HTTP (always on 127.0.0.1).

    python -m tests.peers.demo_server --transport stdio|sse|http [--port N] [--tools N]
                                      [--name NAME] [--page-size N]

Tools: echo, add, search, slow (notices cancellation), fail (tool error), crash (kills the
process mid-call), progress (progress notifications), add_tool (registers a tool at run time and
sends notifications/tools/list_changed), stats (counters), plus ``--tools N`` generated tools
``tool_0000`` ... MCPServer does not paginate tools/list; ``--page-size N`` makes this server do
it, so clients' cursor handling is exercised against a real peer.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import anyio
import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

STATS = {"slow_started": 0, "slow_cancelled": 0, "slow_completed": 0}


class PagingServer(MCPServer[Any]):
    """MCPServer whose tools/list answers in pages of ``page_size`` (0 = one page)."""

    def __init__(self, name: str, page_size: int) -> None:
        super().__init__(name=name)
        self.page_size = page_size

    async def _handle_list_tools(
        self, ctx: Any, params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        tools = await self.list_tools()
        if self.page_size <= 0:
            return mcp_types.ListToolsResult(tools=tools)
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + self.page_size
        next_cursor = str(end) if end < len(tools) else None
        return mcp_types.ListToolsResult(tools=tools[start:end], next_cursor=next_cursor)


def build_server(name: str, extra_tools: int, page_size: int) -> PagingServer:
    """The demo server with its fixed tools and ``extra_tools`` generated ones."""
    server = PagingServer(name, page_size)

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @server.tool()
    def search(query: str) -> str:
        """Search documents in the demo library for the query and return the matching titles."""
        return f"results for {query}: doc-1, doc-2"

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep for the given number of seconds (notices cancellation)."""
        STATS["slow_started"] += 1
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            STATS["slow_cancelled"] += 1
            raise
        STATS["slow_completed"] += 1
        return f"slept {seconds}"

    @server.tool()
    def fail(message: str) -> str:
        """Fail with a tool error (isError: true)."""
        raise ToolError(message)

    @server.tool()
    def crash() -> str:
        """Kill the server process abruptly, mid-call."""
        os._exit(1)

    @server.tool()
    async def progress(steps: int, ctx: Context) -> str:
        """Send one progress notification per step."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
            await anyio.sleep(0.01)
        return f"done {steps}"

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Register a new tool at run time and notify clients that the tool list changed."""

        def added() -> str:
            return f"{name} ok"

        server.add_tool(added, name=name, description=f"Tool {name} added at run time")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    @server.tool()
    def getenv(name: str) -> str:
        """Return the value of an environment variable of this process ("" when unset)."""
        return os.environ.get(name, "")

    @server.tool()
    def stats() -> dict[str, int]:
        """Counters of the slow tool (started, cancelled, completed)."""
        return dict(STATS)

    for index in range(extra_tools):
        description = f"Generated tool number {index}"
        server.add_tool(_generated(index), name=f"tool_{index:04d}", description=description)
    return server


def _generated(index: int) -> Any:
    def generated(value: str = "") -> str:
        return f"tool_{index:04d}:{value}"

    return generated


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=["stdio", "sse", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--name", default="demo")
    parser.add_argument("--page-size", type=int, default=0)
    args = parser.parse_args(argv)
    server = build_server(args.name, args.tools, args.page_size)
    if args.transport == "stdio":
        server.run("stdio")
    elif args.transport == "sse":
        server.run("sse", host="127.0.0.1", port=args.port)
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
