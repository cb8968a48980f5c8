"""Request body limits for every endpoint: its size (``TOOLMESH_MAX_REQUEST_BODY_BYTES``, 413) and how
deep its JSON nests (``TOOLMESH_MAX_REQUEST_JSON_DEPTH``, 422), with the contract's error body.

A declared ``Content-Length`` over the limit is refused before anything is read; otherwise the
body is read (at most the limit, however it is sent) before the app sees it, so the 413 can still
be answered once the limit is passed, and the nesting of a JSON body is measured before any parser
recurses into it.
"""

from __future__ import annotations

from collections import deque

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolmesh.errors import RequestTooLarge, ToolmeshError, ValidationFailed
from toolmesh_gateway.json_depth import json_depth, looks_like_json
from toolmesh_gateway.scope_headers import header


class BodyLimit:
    """ASGI middleware refusing request bodies over ``max_bytes``, or JSON nested over ``max_depth``."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_depth: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = header(scope, "content-length") or ""
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        received: deque[Message] = deque()
        size = 0
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        if size > self.max_depth:  # a body shorter than the limit cannot nest deeper than it
            body = b"".join(m.get("body", b"") for m in received if m["type"] == "http.request")
            if looks_like_json(body) and json_depth(body) > self.max_depth:
                error = ValidationFailed(
                    f"Request JSON nests deeper than {self.max_depth} levels", {"max_depth": self.max_depth}
                )
                await self._answer(error, scope, receive, send)
                return

        async def replay() -> Message:
            return received.popleft() if received else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = RequestTooLarge(f"Request body is larger than {self.max_bytes} bytes", {"max_bytes": self.max_bytes})
        await self._answer(error, scope, receive, send)

    @staticmethod
    async def _answer(error: ToolmeshError, scope: Scope, receive: Receive, send: Send) -> None:
        await JSONResponse(error.body(), status_code=error.status)(scope, receive, send)
