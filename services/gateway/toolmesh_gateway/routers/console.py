"""``/ui/``: the web console, static files shipped in this package (no build step, no CDN).

The files are public (they hold no data); everything they show comes from the API with the key
the user signs in with. Every file is sent with a strict Content-Security-Policy: scripts,
styles and connections to this origin only, no inline script, no framing.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import RedirectResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

CONSOLE_DIR = Path(__file__).resolve().parent.parent / "console"
CONSOLE_PATH = "/ui"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


class ConsoleFiles(StaticFiles):
    """The console's files, each with the security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


@router.get("/")
async def home() -> RedirectResponse:
    """The root of the gateway opens the console."""
    return RedirectResponse(f"{CONSOLE_PATH}/")


def mount_console(app: FastAPI) -> None:
    """Serve the console under ``/ui/`` (``/ui`` redirects there)."""
    app.include_router(router)
    app.mount(CONSOLE_PATH, ConsoleFiles(directory=CONSOLE_DIR, html=True), name="console")
