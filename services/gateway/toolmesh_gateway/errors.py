"""The one place where toolmesh errors become HTTP responses."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from toolmesh.errors import ToolmeshError

VALIDATION_ERROR = "VALIDATION_ERROR"


async def _toolmesh_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ToolmeshError)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers() or None)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 body (``detail``: a list of errors with ``loc`` and ``msg``) plus the contract's
    ``error_code``."""
    assert isinstance(exc, RequestValidationError)
    body = {"detail": jsonable_encoder(exc.errors()), "error_code": VALIDATION_ERROR}
    return JSONResponse(body, status_code=422)


def install_error_handlers(app: FastAPI) -> None:
    """Map every ``ToolmeshError`` to its status and the contract's error body, and tag 422s."""
    app.add_exception_handler(ToolmeshError, _toolmesh_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
