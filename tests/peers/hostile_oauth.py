"""A hostile OAuth-protected upstream with its own hostile authorization server, for tests (127.0.0.1 only).

    python tests/peers/hostile_oauth.py --port N [--issuer ORIGIN] [--padding BYTES]
                                        [--token-answer TEXT] [--authorization-endpoint URL]
                                        [--resource-metadata URL] [--token-hold]
                                        [--client-secret-bytes N]

``/mcp`` answers 401 naming its protected-resource metadata at ``/prm`` (or ``--resource-metadata``),
which names ``--issuer`` (default: this origin) as its authorization server, after ``--padding``
bytes of JSON whitespace
streamed first: a valid answer that never ends for a client that reads without a bound. As an
authorization server it registers any client, its ``/authorize`` answers 302 to the redirect URI
with a code at once, and its ``/token`` answers ``--token-answer`` (any text, as JSON);
``--authorization-endpoint`` is what its metadata names as its authorization endpoint.
``--token-hold`` keeps every token request waiting until ``POST /control/release`` (``GET
/control/asked`` says whether one arrived), so a test can act while a code is being exchanged.
``--client-secret-bytes N`` gives each registered client a fresh secret of ``N`` characters, and its
``/mcp`` challenge names another scope each time (so no client registered before fits).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import secrets
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

CHUNK = 1 << 20


def app(origin: str, args: argparse.Namespace) -> Starlette:
    """The hostile upstream and authorization server at ``origin``."""
    issuer = args.issuer or origin
    asked, released = asyncio.Event(), asyncio.Event()
    challenges = itertools.count(1)

    async def mcp(_: Request) -> Response:
        challenge = f'Bearer resource_metadata="{args.resource_metadata or origin + "/prm"}"'
        if args.client_secret_bytes:
            challenge += f', scope="s{next(challenges)}"'
        return JSONResponse({"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": challenge})

    async def prm(_: Request) -> Response:
        document = json.dumps({"resource": f"{origin}/mcp", "authorization_servers": [issuer]}).encode()

        async def body() -> AsyncIterator[bytes]:
            for start in range(0, args.padding, CHUNK):
                yield b" " * min(CHUNK, args.padding - start)
            yield document

        return StreamingResponse(body(), media_type="application/json")

    async def metadata(_: Request) -> Response:
        return JSONResponse(
            {
                "issuer": origin,
                "authorization_endpoint": args.authorization_endpoint or f"{origin}/authorize",
                "token_endpoint": f"{origin}/token",
                "registration_endpoint": f"{origin}/register",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def register(request: Request) -> Response:
        asked = await request.json()
        made = {"client_id": "hostile-client"}
        if args.client_secret_bytes:
            made["client_secret"] = secrets.token_urlsafe(args.client_secret_bytes)[: args.client_secret_bytes]
            made["token_endpoint_auth_method"] = "client_secret_post"
        return JSONResponse({**asked, **made}, status_code=201)

    async def authorize(request: Request) -> Response:
        query = urlencode({"code": "hostile-code", "state": request.query_params["state"]})
        return RedirectResponse(f"{request.query_params['redirect_uri']}?{query}", status_code=302)

    async def token(_: Request) -> Response:
        asked.set()
        if args.token_hold:
            await released.wait()
        return Response(args.token_answer, media_type="application/json")

    async def token_asked(_: Request) -> Response:
        return JSONResponse({"asked": asked.is_set()})

    async def release(_: Request) -> Response:
        released.set()
        return JSONResponse({"released": True})

    return Starlette(
        routes=[
            Route("/mcp", mcp, methods=["GET", "POST"]),
            Route("/prm", prm),
            Route("/.well-known/oauth-authorization-server", metadata),
            Route("/register", register, methods=["POST"]),
            Route("/authorize", authorize),
            Route("/token", token, methods=["POST"]),
            Route("/control/asked", token_asked),
            Route("/control/release", release, methods=["POST"]),
        ]
    )


def main() -> None:
    """Serve on 127.0.0.1."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--issuer")
    parser.add_argument("--padding", type=int, default=0)
    parser.add_argument("--token-answer", default='{"access_token": "hostile-access", "token_type": "Bearer"}')
    parser.add_argument("--authorization-endpoint")
    parser.add_argument("--resource-metadata")
    parser.add_argument("--token-hold", action="store_true")
    parser.add_argument("--client-secret-bytes", type=int, default=0)
    args = parser.parse_args()
    origin = f"http://127.0.0.1:{args.port}"
    uvicorn.run(app(origin, args), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
