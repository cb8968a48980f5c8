"""The one place where toolmesh errors become HTTP responses."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolmesh.errors import BackendUnavailable, ToolmeshError, ValidationFailed
from toolmesh.platform.bus.unreachable import NATS_UNREACHABLE

VALIDATION_ERROR = "VALIDATION_ERROR"


class ErrorBody(JSONResponse):
    """An error body as ASCII JSON: text the client sent (echoed in ``detail`` or an error's ``input``)
    may hold a lone surrogate, which has no UTF-8 form; escaped, it is still JSON."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def error_response(exc: Exception) -> JSONResponse:
    """The contract's answer to a ``ToolmeshError``: its status and error body; to anything else (one
    of ``NATS_UNREACHABLE``), 503 ``BACKEND_UNAVAILABLE``."""
    if not isinstance(exc, ToolmeshError):
        exc = BackendUnavailable(f"NATS unreachable: {type(exc).__name__}: {exc}")
    return ErrorBody(exc.body(), status_code=exc.status, headers=exc.headers() or None)


async def _toolmesh_error(request: Request, exc: Exception) -> JSONResponse:
    return error_response(exc)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 body (``detail``: a list of errors with ``loc`` and ``msg``) plus the contract's
    ``error_code``."""
    assert isinstance(exc, RequestValidationError)
    body = {"detail": jsonable_encoder(exc.errors()), "error_code": VALIDATION_ERROR}
    return ErrorBody(body, status_code=422)


async def _http_error(request: Request, exc: Exception) -> Response:
    """A body that is not JSON text (invalid UTF-8, an integer too long to read: FastAPI's 400 "error
    parsing the body") is the contract's ``VALIDATION_ERROR``; other HTTP errors as FastAPI answers them."""
    assert isinstance(exc, HTTPException)
    cause = exc.__cause__
    if exc.status_code == 400 and isinstance(cause, ValueError):
        why = (
            f"invalid UTF-8 at byte {cause.start}"
            if isinstance(cause, UnicodeDecodeError)
            else str(cause).split(";")[0]
        )
        error = ValidationFailed(
            "Request body is not valid JSON", {"errors": [{"loc": ["body"], "msg": why, "type": "json_invalid"}]}
        )
        return error_response(error)
    return await http_exception_handler(request, exc)


def install_error_handlers(app: FastAPI) -> None:
    """Map every ``ToolmeshError`` to its status and the contract's error body, NATS being unreachable to
    ``BACKEND_UNAVAILABLE`` (503), and tag 422s."""
    app.add_exception_handler(ToolmeshError, _toolmesh_error)
    for error in NATS_UNREACHABLE:
        app.add_exception_handler(error, _toolmesh_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)


class ErrorResponses:
    """ASGI middleware for what is served beside FastAPI (the MCP routes): a ``ToolmeshError`` or NATS
    being unreachable, raised before the response started, is answered as FastAPI's handlers answer it."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._app(scope, receive, sending)
        except (ToolmeshError, *NATS_UNREACHABLE) as exc:
            if started:
                raise
            await error_response(exc)(scope, receive, send)
