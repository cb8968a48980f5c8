"""A hostile 2026-07-28 Streamable HTTP upstream, for tests (127.0.0.1 only).

    python tests/peers/hostile_stateless.py --port N

``POST /mcp`` answers ``server/discover`` naming 2026-07-28, and ``tools/call`` as its tool's name
says: ``deep`` a result nested far past any parser's recursion, ``huge-progress`` an SSE stream whose
progress notification carries an integer no float holds before the result, ``chatter`` an SSE stream
of notifications before the result (a method no MCP server sends, a log message without a level,
a server → client request, a tools list change, a valid log message), ``echo…`` the ``Mcp-Name``
and ``X-Evil`` headers it received, anything else a plain result saying ``ok``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

DEPTH = 200_000
HUGE = "1" + "0" * 400


def _sse(*messages: str) -> Response:
    body = "".join(f"event: message\ndata: {m}\n\n" for m in messages)
    return Response(body, media_type="text/event-stream")


async def mcp(request: Request) -> Response:
    message: dict[str, Any] = json.loads(await request.body())
    ident = json.dumps(message.get("id"))
    method = message.get("method")
    if method == "server/discover":
        result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
        return JSONResponse({"jsonrpc": "2.0", "id": message.get("id"), "result": result})
    name = (message.get("params") or {}).get("name")
    if name == "deep":
        nested = "[" * DEPTH + "]" * DEPTH
        return Response(f'{{"jsonrpc":"2.0","id":{ident},"result":{{"x":{nested}}}}}', media_type="application/json")
    if name == "huge-progress":
        token = (message.get("params") or {}).get("_meta", {}).get("progressToken")
        params = f'{{"progressToken":{json.dumps(token)},"progress":{HUGE}}}'
        progress = f'{{"jsonrpc":"2.0","method":"notifications/progress","params":{params}}}'
        done = f'{{"jsonrpc":"2.0","id":{ident},"result":{{"content":[{{"type":"text","text":"ok"}}]}}}}'
        return _sse(progress, done)
    if isinstance(name, str) and name.startswith("echo"):
        seen = {"mcp-name": request.headers.get("mcp-name"), "x-evil": request.headers.get("x-evil")}
        return JSONResponse({"jsonrpc": "2.0", "id": message.get("id"), "result": {"headers": seen}})
    if name == "chatter":
        chatter = [
            {"method": "notifications/hostile/anything", "params": {"x": 1}},
            {"method": "notifications/message", "params": {"data": "no level"}},
            {"id": "to-the-client", "method": "roots/list"},
            {"method": "notifications/tools/list_changed"},
            {"method": "notifications/message", "params": {"level": "info", "data": "valid"}},
        ]
        done = {"id": message.get("id"), "result": {"content": [{"type": "text", "text": "ok"}]}}
        return _sse(*(json.dumps({"jsonrpc": "2.0", **m}) for m in [*chatter, done]))
    result = {"content": [{"type": "text", "text": "ok"}]}
    return JSONResponse({"jsonrpc": "2.0", "id": message.get("id"), "result": result})


def main() -> None:
    """Serve on 127.0.0.1."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
