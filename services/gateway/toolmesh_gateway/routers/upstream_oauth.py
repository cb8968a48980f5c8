"""Authorizing an upstream's OAuth: ``POST /api/v1/aggregator/servers/{id}/authorize`` and the
browser's way back, ``GET /oauth/callback``."""

from __future__ import annotations

import html
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.upstream_auth import AuthorizeResponse
from toolmesh.errors import ToolmeshError
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import caller_of
from toolmesh_gateway.upstream_oauth.authorizing import UpstreamAuthorizations

router = APIRouter(tags=["servers"])
Auth = Annotated[Principal, Depends(require_principal)]
CALLBACK_PATH = "/oauth/callback"
_REFUSALS: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorBody},
    404: {"model": ErrorBody},
    422: {"model": ErrorBody},
    503: {"model": ErrorBody},
}


async def authorizations(request: Request) -> UpstreamAuthorizations:
    """The gateway's upstream authorizations."""
    result: UpstreamAuthorizations = request.app.state.upstream_authorizations
    return result


Authorizations = Annotated[UpstreamAuthorizations, Depends(authorizations)]


def redirect_uri(request: Request) -> str:
    """Where the authorization server sends the browser back: ``TOOLMESH_PUBLIC_URL`` or this request's base."""
    base = request.app.state.backends.settings.public_url or str(request.base_url)
    return f"{base.rstrip('/')}{CALLBACK_PATH}"


@router.post("/api/v1/aggregator/servers/{server_id}/authorize", responses=_REFUSALS)
async def authorize_server(
    server_id: str, request: Request, principal: Auth, flows: Authorizations
) -> AuthorizeResponse:
    """Start authorizing toolmesh at the server's OAuth authorization server (owner or admin of its
    namespace); open ``authorization_url`` in a browser within ``expires_in`` seconds."""
    return await flows.start(server_id, caller_of(request, principal), redirect_uri(request))


def _page(title: str, words: str, status: int) -> HTMLResponse:
    body = (
        "<!doctype html><html><head><meta charset='utf-8'><title>toolmesh</title></head>"
        f"<body><h1>{html.escape(title)}</h1><p>{html.escape(words)}</p></body></html>"
    )
    headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
    return HTMLResponse(body, status_code=status, headers=headers)


@router.get(CALLBACK_PATH, include_in_schema=False)
async def oauth_callback(
    flows: Authorizations,
    code: Annotated[str | None, Query(max_length=4096)] = None,
    state: Annotated[str | None, Query(max_length=512)] = None,
    iss: Annotated[str | None, Query(max_length=2048)] = None,
    error: Annotated[str | None, Query(max_length=256)] = None,
) -> HTMLResponse:
    """Where the authorization server sends the browser back with a code (or an error)."""
    if error is not None or not code or not state:
        words = "The authorization server did not grant access." if error else "The answer has no code or state."
        return _page("Not authorized", words, 400)
    try:
        name = await flows.finish(code, state, iss)
    except ToolmeshError as exc:
        return _page("Not authorized", exc.detail, 400 if exc.status < 500 else 502)
    return _page("Authorized", f"toolmesh is authorized at {name}. You may close this window.", 200)
