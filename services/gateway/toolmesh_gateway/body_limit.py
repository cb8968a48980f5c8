"""Request body limits for every endpoint: its size (``TOOLMESH_MAX_REQUEST_BODY_BYTES``, 413) and how
deep its JSON nests (``TOOLMESH_MAX_REQUEST_JSON_DEPTH``, 422), with the contract's error body.

A declared ``Content-Length`` over the limit is refused before anything is read; otherwise the
body is read (at most the limit, however it is sent) before the app sees it, so the 413 can still
be answered once the limit is passed, and the nesting of a JSON body is measured before any parser
recurses into it.
"""

from __future__ import annotations

import re
from collections import deque

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolmesh.errors import RequestTooLarge, ToolmeshError, ValidationFailed
from toolmesh_gateway.json_depth import json_depth, looks_like_json
from toolmesh_gateway.scope_headers import header

_HIGH = rb"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW = rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_LONE_SURROGATE = re.compile(rb"%s(?!%s)|(?<!%s)%s" % (_HIGH, _LOW, _HIGH, _LOW))
"""A surrogate escape without its pair, once escaped backslashes are taken out."""


def _unreadable(why: str) -> ValidationFailed:
    return ValidationFailed(
        "Request body is not valid JSON", {"errors": [{"loc": ["body"], "msg": why, "type": "json_invalid"}]}
    )


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
        body = b"".join(m.get("body", b"") for m in received if m["type"] == "http.request")
        if looks_like_json(body) and (error := self._json_problem(body)) is not None:
            await self._answer(error, scope, receive, send)
            return

        async def replay() -> Message:
            return received.popleft() if received else await receive()

        await self.app(scope, replay, send)

    def _json_problem(self, body: bytes) -> ValidationFailed | None:
        """Why a JSON body cannot be read as JSON text the gateway can pass on: nested too deep, not
        UTF-8 (Python's parser would take encoded surrogates), or a lone surrogate escape."""
        if len(body) > self.max_depth and json_depth(body) > self.max_depth:
            return ValidationFailed(
                f"Request JSON nests deeper than {self.max_depth} levels", {"max_depth": self.max_depth}
            )
        try:
            body.decode()
        except UnicodeDecodeError as exc:
            return _unreadable(f"invalid UTF-8 at byte {exc.start}")
        if b"\\u" in body and _LONE_SURROGATE.search(body.replace(b"\\\\", b"")):
            return _unreadable("a lone surrogate escape (\\ud800-\\udfff without its pair) has no UTF-8 form")
        return None

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = RequestTooLarge(f"Request body is larger than {self.max_bytes} bytes", {"max_bytes": self.max_bytes})
        await self._answer(error, scope, receive, send)

    @staticmethod
    async def _answer(error: ToolmeshError, scope: Scope, receive: Receive, send: Send) -> None:
        await JSONResponse(error.body(), status_code=error.status)(scope, receive, send)
