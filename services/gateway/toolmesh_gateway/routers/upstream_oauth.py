"""Authorizing an upstream's OAuth: ``POST /api/v1/aggregator/servers/{id}/authorize``, whether the
caller is authorized (``GET .../authorization``), and the browser's way back, ``GET /oauth/callback``."""

from __future__ import annotations

import html
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh.contracts.upstream_auth import AuthorizationState, AuthorizeResponse
from toolmesh.errors import ToolmeshError
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.dependencies import caller_of
from toolmesh_gateway.upstream_oauth.authorizing import UpstreamAuthorizations
from toolmesh_gateway.upstream_oauth.client_urls import CALLBACK_PATH, DOCUMENT_PATH, client_document

router = APIRouter(tags=["servers"])
Auth = Annotated[Principal, Depends(require_principal)]
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


@router.post("/api/v1/aggregator/servers/{server_id}/authorize", responses=_REFUSALS)
async def authorize_server(
    server_id: str, request: Request, principal: Auth, flows: Authorizations
) -> AuthorizeResponse:
    """Start authorizing toolmesh at the server's OAuth authorization server (shared identity: owner or
    admin of its namespace; per-user identity: any caller, for its own account); open
    ``authorization_url`` in a browser within ``expires_in`` seconds."""
    return await flows.start(server_id, caller_of(request, principal))


@router.get("/api/v1/aggregator/servers/{server_id}/authorization", responses=_REFUSALS)
async def authorization_state(
    server_id: str, request: Request, principal: Auth, flows: Authorizations
) -> AuthorizationState:
    """Whether the server holds a grant for the caller (per-user identity) or for everyone (shared)."""
    return await flows.state(server_id, caller_of(request, principal))


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


@router.get(DOCUMENT_PATH, include_in_schema=False)
async def client_metadata_document(request: Request) -> JSONResponse:
    """toolmesh's Client ID Metadata Document (404 without ``TOOLMESH_PUBLIC_URL``: no stable URL)."""
    public_url = request.app.state.backends.settings.public_url
    if not public_url:
        return JSONResponse({"detail": "No client metadata document: TOOLMESH_PUBLIC_URL is not set"}, status_code=404)
    return JSONResponse(client_document(public_url), headers={"Cache-Control": "public, max-age=300"})
