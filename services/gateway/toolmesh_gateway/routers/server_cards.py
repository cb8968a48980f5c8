"""What toolmesh publishes about its MCP endpoints (``front_door.server_cards``): each endpoint's
Server Card at ``<endpoint>/server-card`` (the location the extension reserves) and MCP Registry
``server.json`` at ``<endpoint>/server.json``, and at ``/.well-known/ai-catalog.json`` the AI Catalog
of the cards the caller may read.

Each answers only a caller that may use the endpoint (``front_door.card_facts``). Responses carry an
``ETag`` (``If-None-Match`` answers 304), are private to the caller's authorization, and allow reads
from any origin (the bearer token is the credential; no cookie is ever used).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Path, Request, Response

from toolmesh.contracts.aggregator import ErrorBody
from toolmesh_gateway.authorization_server.addresses import MCP_PATH, base_url
from toolmesh_gateway.front_door.card_facts import CardFacts
from toolmesh_gateway.front_door.server_cards import (
    CARD_MEDIA_TYPE,
    CARD_SUFFIX,
    SERVER_JSON_SUFFIX,
    EndpointFacts,
    catalog_entry,
    server_card,
    server_json,
)

router = APIRouter(tags=["server cards"])
AI_CATALOG_PATH = "/.well-known/ai-catalog.json"
AI_CATALOG_MEDIA_TYPE = "application/ai-catalog+json"
REFUSALS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody},
    403: {"model": ErrorBody},
    404: {"model": ErrorBody},
    429: {"model": ErrorBody},
}
Name = Path(pattern=r"^[A-Za-z0-9_.-]{1,128}$", description="the endpoint's or server's name, as in /mcp/{name}")
_CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, If-None-Match",
    "Access-Control-Expose-Headers": "ETag",
}
Document = Callable[[str, EndpointFacts], dict[str, Any]]


def _facts(request: Request) -> CardFacts:
    result: CardFacts = request.app.state.card_facts
    return result


def _answer(request: Request, document: dict[str, Any], media_type: str) -> Response:
    """``document`` with its ETag and cache headers, or 304 when the client has that version."""
    body = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {**_CORS, "ETag": etag, "Cache-Control": "private, no-cache", "Vary": "Authorization"}
    if etag in [t.strip() for t in request.headers.get("if-none-match", "").split(",")]:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


async def _aggregate(request: Request, document: Document, media_type: str) -> Response:
    facts = _facts(request)
    caller = await facts.caller(request, MCP_PATH)
    return _answer(
        request, document(base_url(request.app.state.backends.settings, request), facts.aggregate(caller)), media_type
    )


async def _named(request: Request, name: str, document: Document, media_type: str) -> Response:
    facts = _facts(request)
    caller = await facts.caller(request, f"{MCP_PATH}/{name}")
    base = base_url(request.app.state.backends.settings, request)
    return _answer(request, document(base, facts.named(caller, name)), media_type)


async def preflight(request: Request) -> Response:
    """A browser's CORS preflight of a GET with an ``Authorization`` header."""
    return Response(status_code=204, headers={**_CORS, "Access-Control-Max-Age": "600"})


@router.get(MCP_PATH + CARD_SUFFIX, responses=REFUSALS)
async def aggregate_card(request: Request) -> Response:
    """The Server Card of the aggregate ``/mcp``."""
    return await _aggregate(request, server_card, CARD_MEDIA_TYPE)


@router.get(MCP_PATH + SERVER_JSON_SUFFIX, responses=REFUSALS)
async def aggregate_server_json(request: Request) -> Response:
    """The MCP Registry ``server.json`` of the aggregate ``/mcp``, as a remote."""
    return await _aggregate(request, server_json, "application/json")


@router.get(MCP_PATH + "/{name}" + CARD_SUFFIX, responses=REFUSALS)
async def endpoint_card(request: Request, name: str = Name) -> Response:
    """The Server Card of ``/mcp/{name}`` (an endpoint, or a server served unchanged)."""
    return await _named(request, name, server_card, CARD_MEDIA_TYPE)


@router.get(MCP_PATH + "/{name}" + SERVER_JSON_SUFFIX, responses=REFUSALS)
async def endpoint_server_json(request: Request, name: str = Name) -> Response:
    """The MCP Registry ``server.json`` of ``/mcp/{name}``, as a remote."""
    return await _named(request, name, server_json, "application/json")


@router.get(AI_CATALOG_PATH, responses=REFUSALS)
async def ai_catalog(request: Request) -> Response:
    """The AI Catalog of the Server Cards of every endpoint the caller may use (authenticated like ``/mcp``)."""
    facts = _facts(request)
    caller = await facts.caller(request, MCP_PATH)
    base = base_url(request.app.state.backends.settings, request)
    entries = [catalog_entry(base, f) for f in await facts.listed(caller)]
    return _answer(request, {"specVersion": "1.0", "entries": entries}, AI_CATALOG_MEDIA_TYPE)


for _path in (
    MCP_PATH + CARD_SUFFIX,
    MCP_PATH + SERVER_JSON_SUFFIX,
    MCP_PATH + "/{name}" + CARD_SUFFIX,
    MCP_PATH + "/{name}" + SERVER_JSON_SUFFIX,
    AI_CATALOG_PATH,
):
    router.add_api_route(_path, preflight, methods=["OPTIONS"], include_in_schema=False)
