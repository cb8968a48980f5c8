"""A hostile OAuth-protected upstream, for tests (127.0.0.1 only).

    python tests/peers/hostile_oauth.py --port N --issuer ORIGIN [--padding BYTES]

``/mcp`` answers 401 naming its protected-resource metadata at ``/prm``, which names ``--issuer`` (a
real authorization server, ``tests/peers/oauth_server.py``) as its authorization server, after
``--padding`` bytes of JSON whitespace streamed first: a valid answer that never ends for a client
that reads without a bound.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

CHUNK = 1 << 20


def app(origin: str, issuer: str, padding: int) -> Starlette:
    """The hostile upstream at ``origin``."""

    async def mcp(_: Request) -> Response:
        challenge = f'Bearer resource_metadata="{origin}/prm"'
        return JSONResponse({"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": challenge})

    async def prm(_: Request) -> Response:
        document = json.dumps({"resource": f"{origin}/mcp", "authorization_servers": [issuer]}).encode()

        async def body() -> AsyncIterator[bytes]:
            for start in range(0, padding, CHUNK):
                yield b" " * min(CHUNK, padding - start)
            yield document

        return StreamingResponse(body(), media_type="application/json")

    return Starlette(routes=[Route("/mcp", mcp, methods=["GET", "POST"]), Route("/prm", prm)])


def main() -> None:
    """Serve on 127.0.0.1."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--padding", type=int, default=0)
    args = parser.parse_args()
    origin = f"http://127.0.0.1:{args.port}"
    uvicorn.run(app(origin, args.issuer, args.padding), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
