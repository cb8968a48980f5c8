"""The one place where toolmesh errors become HTTP responses."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from toolmesh.errors import ToolmeshError, Unauthorized


async def _toolmesh_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ToolmeshError)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    return JSONResponse(exc.body(), status_code=exc.status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Map every ``ToolmeshError`` to its status and the contract's error body."""
    app.add_exception_handler(ToolmeshError, _toolmesh_error)
