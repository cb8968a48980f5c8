"""A real MCP server for tests, over stdio, SSE or Streamable HTTP (always on 127.0.0.1).

    python -m tests.peers.demo_server --transport stdio|sse|http [--port N] [--tools N]
                                      [--name NAME] [--page-size N] [--api-key KEY] [--token T]

Tools: echo, add, search, slow (notices cancellation), fail (tool error), crash (kills the
process mid-call), progress (progress notifications), add_tool (registers a tool at run time and
sends notifications/tools/list_changed), redescribe (changes a tool's description at run time
and sends list_changed), stats (counters), ask (asks the client for a sampling completion on the
call's own stream), roots (asks the client for its roots), touch (notifications/resources/updated
for a URI; resource subscriptions are counted in ``stats``), tally (counts the invocations of each
call key; ``tallies`` returns the counts), block (waits until ``release`` of its key), flood (log
notifications in a tight loop), hang (never answers), big (a result of N megabytes), plus ``--tools N`` generated tools
``tool_0000`` ... Resources: ``demo://readme`` (text), ``demo://logo`` (binary), template
``demo://items/{item}`` (text); prompt ``greet(name)``. MCPServer does not paginate tools/list;
``--page-size N`` makes this server do it, so clients' cursor handling is exercised against a real
peer. ``--api-key KEY`` stands for a secret passed on the command line; the server echoes its
command line on stderr, as careless servers do. ``--token T`` (http only) answers every request
without ``Authorization: Bearer T`` with HTTP 401, as a server refusing a wrong key does.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio
import mcp_types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

TALLIES: dict[str, int] = {}
RELEASES: dict[str, anyio.Event] = {}
STATS = {
    "slow_started": 0,
    "slow_cancelled": 0,
    "slow_completed": 0,
    "subscribes": 0,
    "unsubscribes": 0,
    "flood_sent": 0,
    "blocked": 0,
}


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
    _add_basic_tools(server)
    _add_list_changing_tools(server)
    _add_inspection_tools(server)
    _add_misbehaving_tools(server)
    _add_client_facing_tools(server)
    _add_resources_and_prompt(server, name)
    for index in range(extra_tools):
        description = f"Generated tool number {index}"
        server.add_tool(_generated(index), name=f"tool_{index:04d}", description=description)
    return server


def _add_basic_tools(server: PagingServer) -> None:
    """Tools that answer, fail, crash or report progress: echo, add, search, slow, fail, crash, progress."""

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


def _add_list_changing_tools(server: PagingServer) -> None:
    """Tools that change the tool list at run time and send notifications/tools/list_changed."""

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Register a new tool at run time and notify clients that the tool list changed."""

        def added() -> str:
            TALLIES[name] = TALLIES.get(name, 0) + 1  # a test asks ``tallies`` whether it was called
            return f"{name} ok"

        server.add_tool(added, name=name, description=f"Tool {name} added at run time")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    @server.tool()
    async def redescribe(name: str, description: str, ctx: Context) -> str:
        """Give an existing tool a new description at run time and notify clients (a "rug pull")."""
        tool = server._tool_manager.get_tool(name)
        if tool is None:
            raise ToolError(f"no tool {name}")
        server.remove_tool(name)
        server.add_tool(tool.fn, name=name, description=description)
        await ctx.session.send_tool_list_changed()
        return f"redescribed {name}"


def _add_inspection_tools(server: PagingServer) -> None:
    """Tools that show the process's environment and the counters tests read: getenv, stats, tally, tallies."""

    @server.tool()
    def getenv(name: str) -> str:
        """Return the value of an environment variable of this process ("" when unset)."""
        return os.environ.get(name, "")

    @server.tool()
    def stats() -> dict[str, int]:
        """Counters of the slow tool (started, cancelled, completed), of resource subscriptions and of the
        notifications of the current (or last) flood."""
        return dict(STATS)

    @server.tool()
    def tally(key: str) -> str:
        """Count one invocation of ``key`` (a caller's own call id) and return ``key``."""
        TALLIES[key] = TALLIES.get(key, 0) + 1
        return key

    @server.tool()
    async def block(until: str) -> str:
        """Wait until ``release(until)`` was called (``stats`` counts the calls that started), then return ``until``."""
        STATS["blocked"] += 1
        await RELEASES.setdefault(until, anyio.Event()).wait()
        return until

    @server.tool()
    async def release(key: str) -> str:
        """Let every ``block(key)``, running or still to come, return."""
        RELEASES.setdefault(key, anyio.Event()).set()
        return key

    @server.tool()
    def tallies() -> dict[str, int]:
        """How often each ``tally`` key, and each tool added at run time, was invoked."""
        return dict(TALLIES)


def _add_misbehaving_tools(server: PagingServer) -> None:
    """Tools that misbehave: flood (log notifications), hang (never answers), big (a huge result)."""

    @server.tool()
    async def flood(seconds: float, ctx: Context, until: str = "") -> int:
        """Send log notifications in a tight loop for ``seconds``, or until ``tally(until)`` was called
        (``stats`` counts them as they go out); the number sent."""
        STATS["flood_sent"] = 0
        with anyio.move_on_after(seconds):
            while not (until and until in TALLIES):
                await ctx.info(f"flood {STATS['flood_sent']}")
                STATS["flood_sent"] += 1
        return STATS["flood_sent"]

    @server.tool()
    async def hang() -> str:
        """Never answer (until cancelled)."""
        await anyio.sleep_forever()
        return "unreachable"

    @server.tool(structured_output=False)
    def big(megabytes: int) -> str:
        """A text result of ``megabytes`` MB (as text content only)."""
        return "x" * (megabytes * 1024 * 1024)


def _add_client_facing_tools(server: PagingServer) -> None:
    """Tools that ask or tell the client (roots, touch, ask) and the counted resource subscriptions."""

    @server.tool()
    async def roots(ctx: Context) -> str:
        """The client's roots (roots/list), comma-separated."""
        listed = await ctx.session.list_roots()
        return ",".join(str(root.uri) for root in listed.roots)

    @server.tool()
    async def touch(uri: str, ctx: Context) -> str:
        """Tell the client the resource ``uri`` changed (notifications/resources/updated)."""
        await ctx.session.send_resource_updated(uri)
        return f"touched {uri}"

    async def subscribe(ctx: Any, params: mcp_types.SubscribeRequestParams) -> mcp_types.EmptyResult:
        STATS["subscribes"] += 1
        return mcp_types.EmptyResult()

    async def unsubscribe(ctx: Any, params: mcp_types.UnsubscribeRequestParams) -> mcp_types.EmptyResult:
        STATS["unsubscribes"] += 1
        return mcp_types.EmptyResult()

    lowlevel = server._lowlevel_server  # MCPServer has no decorator for resource subscriptions
    lowlevel.add_request_handler("resources/subscribe", mcp_types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", mcp_types.UnsubscribeRequestParams, unsubscribe)

    @server.tool()
    async def ask(question: str, ctx: Context) -> str:
        """Ask the client's model a question (sampling/createMessage) and return its answer."""
        message = mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(type="text", text=question))
        answer = await ctx.session.create_message([message], max_tokens=50, related_request_id=ctx.request_id)
        content = answer.content
        return f"model said: {content.text if isinstance(content, mcp_types.TextContent) else content}"


def _add_resources_and_prompt(server: PagingServer, name: str) -> None:
    """The resources (readme, logo, the item template) and the ``greet`` prompt of server ``name``."""

    @server.resource("demo://readme", name="readme", description="The demo server's readme", mime_type="text/plain")
    def readme() -> str:
        return f"# {name}\nA demo server."

    @server.resource("demo://logo", name="logo", mime_type="image/png")
    def logo() -> bytes:
        return bytes(range(16))

    @server.resource("demo://items/{item}", name="item", description="One item", mime_type="text/plain")
    def item(item: str) -> str:
        return f"item {item} of {name}"

    @server.prompt()
    def greet(name: str) -> str:
        """Greet someone by name."""
        return f"Say hello to {name}."


def _generated(index: int) -> Any:
    def generated(value: str = "") -> str:
        return f"tool_{index:04d}:{value}"

    return generated


def require_token(app: ASGIApp, token: str) -> ASGIApp:
    """``app`` behind a bearer check: a request without ``Authorization: Bearer token`` gets 401."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", []))
        if scope["type"] == "http" and headers.get(b"authorization") != f"Bearer {token}".encode():
            await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
            return
        await app(scope, receive, send)

    return guarded


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=["stdio", "sse", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--name", default="demo")
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--api-key")
    parser.add_argument("--token", help="http only: refuse requests without this bearer token (401)")
    args = parser.parse_args(argv)
    if args.api_key is not None:
        print(f"{args.name}: started with --api-key {args.api_key}", file=sys.stderr, flush=True)
    server = build_server(args.name, args.tools, args.page_size)
    if args.transport == "stdio":
        server.run("stdio")
    elif args.transport == "sse":
        server.run("sse", host="127.0.0.1", port=args.port)
    elif args.token is None:
        server.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        app = require_token(server.streamable_http_app(), args.token)
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
