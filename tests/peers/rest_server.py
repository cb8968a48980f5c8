"""A REST tool server (the connection API spec's protocol) for tests, on 127.0.0.1.

    python -m tests.peers.rest_server --port N [--token T] [--tools-list ok|no-tools|not-a-list|no-name|no-description]

``GET /health``, ``GET /tools`` and ``POST /tools/execute`` (``{"tool", "arguments", "requestId"}``),
each refusing a request without ``Authorization: Bearer T`` when ``--token`` is given (401).
``--tools-list`` makes ``GET /tools`` answer a malformed list. Tools:

* ``search_memory(query, limit)``: ``{"results": [...]}``;
* ``echo(text)``: ``{"text": text, "requestId": ...}`` (the id it was sent);
* ``add(a, b)``: the bare number;
* ``send_email(to, subject)``: ``{"sent": true}``;
* ``fail()``: 200 with the error object ``TOOL_EXECUTION_FAILED`` (a failure of the tool it ran);
* ``explode()``: 500 with the error object ``TOOL_EXECUTION_FAILED``;
* ``garble()``: 500 with a body that is not JSON;
* ``slow(seconds)``: answers after ``seconds``.

An unknown tool is 404. Test controls (never authenticated): ``POST /control`` with
``{"health": "ok"|"error"}`` (``/health`` answers 200 or 503) or ``{"remove": tool}`` (the tool
is no longer listed and its calls are 404); ``GET /requests`` returns every execute body received
with whether it carried the token; ``GET /headers`` the headers of every request to the tool server.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

TOOLS: list[dict[str, Any]] = [
    {
        "name": "search_memory",
        "description": "Search semantic memories stored by the agent",
        "inputSchema": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"],
        },
    },
    {
        "name": "echo",
        "description": "Return the text unchanged",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "add",
        "description": "Add two numbers",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
    {
        "name": "send_email",
        "description": "Send an email message to a recipient",
        "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}}},
    },
    {"name": "fail", "description": "Runs and reports that it failed"},
    {"name": "explode", "description": "Crashes the server with an internal error"},
    {"name": "garble", "description": "Answers an internal error that is not JSON"},
    {
        "name": "slow",
        "description": "Wait for some seconds, then answer",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
    },
]
MALFORMED: dict[str, Any] = {
    "no-tools": {"items": TOOLS},
    "not-a-list": {"tools": {"name": "echo"}},
    "no-name": {"tools": [TOOLS[0], {"description": "A tool without a name"}]},
    "no-description": {"tools": [TOOLS[0], {"name": "mystery", "inputSchema": {"type": "object"}}]},
}


def failure(code: str, message: str, tool: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": {"tool": tool}}}


async def run_tool(name: str, args: dict[str, Any], request_id: Any) -> Response:
    """The answer of the listed tool ``name`` to ``args`` (``request_id`` is the execute body's)."""
    if name == "search_memory":
        found = [f"memory {i} about {args['query']}" for i in range(3)]
        return JSONResponse({"results": found[: int(args.get("limit", 3))]})
    if name == "echo":
        return JSONResponse({"text": args.get("text"), "requestId": request_id})
    if name == "add":
        return JSONResponse(args["a"] + args["b"])
    if name == "send_email":
        return JSONResponse({"sent": True, "to": args.get("to")})
    if name == "fail":
        return JSONResponse(failure("TOOL_EXECUTION_FAILED", "the disk is full", "fail"))
    if name == "explode":
        return JSONResponse(failure("TOOL_EXECUTION_FAILED", "boom", "explode"), status_code=500)
    if name == "garble":
        return PlainTextResponse("Internal Server Error", status_code=500)
    await asyncio.sleep(float(args.get("seconds", 1)))
    return JSONResponse({"slept": args.get("seconds", 1)})


def build_app(token: str | None, tools_list: str) -> Starlette:
    """The app; its state (health, removed tools, requests received) lives in the closure."""
    state: dict[str, Any] = {"health": "ok", "removed": set(), "requests": [], "headers": []}

    def authorized(request: Request) -> bool:
        state["headers"].append({"path": request.url.path, "headers": dict(request.headers)})
        return token is None or request.headers.get("authorization") == f"Bearer {token}"

    def listed() -> list[dict[str, Any]]:
        return [t for t in TOOLS if t["name"] not in state["removed"]]

    async def health(request: Request) -> JSONResponse:
        if not authorized(request):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        if state["health"] != "ok":
            return JSONResponse({"status": "unhealthy"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def tools(request: Request) -> JSONResponse:
        if not authorized(request):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return JSONResponse(MALFORMED.get(tools_list, {"tools": listed()}))

    async def execute(request: Request) -> Any:
        body = await request.json()
        state["requests"].append({"body": body, "authorized": authorized(request)})
        if not authorized(request):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        name, args = body.get("tool"), body.get("arguments") or {}
        if name not in {t["name"] for t in listed()}:
            return JSONResponse(failure("TOOL_NOT_FOUND", f"no tool {name}", str(name)), status_code=404)
        return await run_tool(name, args, body.get("requestId"))

    async def control(request: Request) -> JSONResponse:
        body = await request.json()
        if "health" in body:
            state["health"] = body["health"]
        if "remove" in body:
            state["removed"].add(body["remove"])
        return JSONResponse({"health": state["health"], "removed": sorted(state["removed"])})

    async def received(request: Request) -> JSONResponse:
        return JSONResponse(state["requests"])

    async def headers(request: Request) -> JSONResponse:
        return JSONResponse(state["headers"])

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/tools", tools),
            Route("/tools/execute", execute, methods=["POST"]),
            Route("/control", control, methods=["POST"]),
            Route("/requests", received),
            Route("/headers", headers),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token")
    parser.add_argument("--tools-list", default="ok", choices=["ok", *MALFORMED])
    args = parser.parse_args()
    app = build_app(args.token, args.tools_list)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
