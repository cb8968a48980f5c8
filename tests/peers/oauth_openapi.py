"""The OAuth peer (``oauth_server.py``, REST tool protocol at ``/api``) described by an OpenAPI 3.1
document, for tests of OPENAPI servers registered with ``auth``, on 127.0.0.1.

    python tests/peers/oauth_openapi.py --port N [--user alice]

``GET /openapi.json`` (never authenticated) describes ``POST /api/tools/execute`` as the operation
``execute`` (body ``{"tool": ..., "arguments": {...}}``; ``whoami`` answers the user the token was
issued for), guarded by the oauth2 scheme ``peer`` whose ``authorizationCode`` flow points at this
peer's authorization server (scope ``mcp``), and ``GET /api/health`` as ``health``, which the
document declares open (``security: []``) though the peer refuses it without a token: its call
shows whether toolmesh sent the token where the document asks none. Every request to ``/api``
without a valid bearer token is answered 401. ``GET /control/seen`` lists the ``Authorization``
header of every request to ``/api`` (empty when there was none); the other controls are the OAuth
peer's.
"""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn
from oauth_server import build
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send


def document(issuer: str) -> dict[str, Any]:
    """The OpenAPI document of the peer at ``issuer``."""
    body = {
        "type": "object",
        "required": ["tool"],
        "properties": {"tool": {"type": "string"}, "arguments": {"type": "object"}},
    }
    answer = {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}
    flow = {"authorizationUrl": f"{issuer}/authorize", "tokenUrl": f"{issuer}/token", "scopes": {"mcp": "use the API"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "oauth peer", "version": "1"},
        "servers": [{"url": f"{issuer}/api"}],
        "security": [{"peer": ["mcp"]}],
        "components": {"securitySchemes": {"peer": {"type": "oauth2", "flows": {"authorizationCode": flow}}}},
        "paths": {
            "/tools/execute": {
                "post": {
                    "operationId": "execute",
                    "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
                    "responses": {"200": answer},
                }
            },
            "/health": {"get": {"operationId": "health", "security": [], "responses": {"200": answer}}},
        },
    }


class OpenApiFace:
    """Serves the document and ``/control/seen``; notes the ``Authorization`` of requests to ``/api``."""

    def __init__(self, app: Any, issuer: str) -> None:
        self.app = app
        self.document = document(issuer)
        self.seen: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == "/openapi.json":
            await JSONResponse(self.document)(scope, receive, send)
            return
        if path == "/control/seen":
            await JSONResponse({"authorization": self.seen})(scope, receive, send)
            return
        if path.startswith("/api/"):
            self.seen.append(dict(scope["headers"]).get(b"authorization", b"").decode())
        await self.app(scope, receive, send)


def main() -> None:
    """Serve until stopped."""
    parser = argparse.ArgumentParser(description="An OAuth-protected API an OpenAPI document describes")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--user", default="alice")
    args = parser.parse_args()
    app = OpenApiFace(build(args.port, args.user, transport="rest"), f"http://127.0.0.1:{args.port}")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
