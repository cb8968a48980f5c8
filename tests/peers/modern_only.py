"""An MCP server over Streamable HTTP that speaks only the 2026-07-28 era, for tests (127.0.0.1 only).

    python tests/peers/modern_only.py --port N

It refuses ``initialize`` (``-32022``, naming 2026-07-28) and the GET stream, as a server without the
handshake era does; everything else is the MCP SDK's server. Its tools ask for input the way that
era does (``InputRequiredResult`` rounds): ``confirm`` elicits a confirmation, ``think`` samples the
client's model. ``grow`` adds the tool ``grown`` and says the tool list changed; ``set_note`` changes
the resource ``memo://note`` and says it was updated. ``shout`` logs at info level. ``counted``
counts its runs per label and ``runs`` reads them back.
"""

from __future__ import annotations

import argparse
import json
from typing import Annotated, Any

import mcp_types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from pydantic import BaseModel

REFUSED_HANDSHAKE = -32022
SUPPORTED = {"supported": ["2026-07-28"]}
NOTE = {"text": "first"}
RUNS: dict[str, int] = {}


class Confirmation(BaseModel):
    confirm: bool


def ask_confirmation(action: str) -> Elicit[Confirmation]:
    return Elicit(f"Really {action}?", Confirmation)


def ask_model(prompt: str) -> Sample:
    message = mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(type="text", text=prompt))
    return Sample([message], max_tokens=50)


def build_server() -> MCPServer[Any]:
    """The server and its tools."""
    server: MCPServer[Any] = MCPServer(name="modern-only")

    @server.tool()
    def echo(text: str) -> str:
        """Echo ``text``."""
        return f"echo: {text}"

    @server.tool()
    def confirm(action: str, answer: Annotated[Confirmation, Resolve(ask_confirmation)]) -> str:
        """Asks before doing ``action``."""
        return f"{'did' if answer.confirm else 'skipped'} {action}"

    @server.tool()
    def think(prompt: str, sampled: Annotated[mcp_types.CreateMessageResult, Resolve(ask_model)]) -> str:
        """Asks the client's model about ``prompt``."""
        content = sampled.content
        return f"model said: {content.text if isinstance(content, mcp_types.TextContent) else '?'}"

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Adds the tool ``grown``."""

        def grown() -> str:
            """A tool added later."""
            return "grown"

        server.add_tool(grown)
        await ctx.notify_tools_changed()
        return "grew"

    @server.resource("memo://note")
    def note() -> str:
        """A note that ``set_note`` changes."""
        return NOTE["text"]

    @server.tool()
    async def set_note(text: str, ctx: Context) -> str:
        """Changes ``memo://note``."""
        NOTE["text"] = text
        await ctx.notify_resource_updated("memo://note")
        return "noted"

    @server.tool()
    async def shout(text: str, ctx: Context) -> str:
        """Logs ``text`` at info level, then answers."""
        await ctx.info(f"shouting {text}")
        return "shouted"

    @server.tool()
    def counted(label: str) -> str:
        """Counts a run of ``label``."""
        RUNS[label] = RUNS.get(label, 0) + 1
        return f"run {RUNS[label]}"

    @server.tool()
    def runs(label: str) -> str:
        """How many times ``label`` ran."""
        return str(RUNS.get(label, 0))

    return server


class WithoutHandshake:
    """ASGI middleware: ``initialize`` and the GET stream refused, the rest passed to ``app``."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if scope["method"] == "GET":
            await _respond(send, 405, b"")
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            request = json.loads(body or b"null")
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "initialize":
            error = {"code": REFUSED_HANDSHAKE, "message": "Unsupported protocol version", "data": SUPPORTED}
            await _respond(send, 400, json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": error}).encode())
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, replay, send)


async def _respond(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    app = WithoutHandshake(build_server().streamable_http_app(host="127.0.0.1"))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1)
