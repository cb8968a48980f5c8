"""An OpenAI-compatible chat-completions endpoint for tests of the LLM classifier, on 127.0.0.1.

    python -m tests.peers.chat_endpoint --port N

``POST /v1/chat/completions`` answers the classifier's prompt with every tool it lists in the
skill ``utilities`` (confidence 0.9), or 503 while failing. Test controls: ``POST /control``
``{"failing": true|false}``; ``GET /calls`` counts the completions asked for.
"""

from __future__ import annotations

import argparse
import json
import re

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

STATE = {"failing": False, "calls": 0}
_TOOL_LINE = re.compile(r"^- ([^:]+):", re.MULTILINE)


async def completions(request: Request) -> JSONResponse:
    STATE["calls"] += 1
    if STATE["failing"]:
        return JSONResponse({"error": {"message": "model unavailable"}}, status_code=503)
    prompt = (await request.json())["messages"][-1]["content"]
    listed = prompt.split("Tools of the server", 1)[1]
    answer = {
        "tools": [
            {"name": n, "skills": [{"skill_id": "utilities", "confidence": 0.9}]} for n in _TOOL_LINE.findall(listed)
        ]
    }
    return JSONResponse({"choices": [{"message": {"role": "assistant", "content": json.dumps(answer)}}]})


async def control(request: Request) -> JSONResponse:
    STATE["failing"] = bool((await request.json())["failing"])
    return JSONResponse(STATE)


async def calls(request: Request) -> JSONResponse:
    return JSONResponse(STATE)


app = Starlette(
    routes=[
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/control", control, methods=["POST"]),
        Route("/calls", calls),
    ]
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--failing", action="store_true")
    args = parser.parse_args()
    STATE["failing"] = args.failing
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
