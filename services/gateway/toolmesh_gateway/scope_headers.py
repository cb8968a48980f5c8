"""One request header read straight from the ASGI scope (the MCP routes run outside FastAPI, and
starlette's ``Headers`` decodes the whole list for each lookup)."""

from __future__ import annotations

from starlette.types import Scope


def header(scope: Scope, name: str) -> str | None:
    """The first value of header ``name`` (any case), or None."""
    wanted = name.lower().encode("latin-1")
    return next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == wanted), None)
