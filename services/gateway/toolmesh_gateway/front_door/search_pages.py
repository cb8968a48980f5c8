"""``search_tools`` results a page at a time: its arguments, tools or servers, and the next page's cursor.

A call ranks the caller's visible tools once (the search service's best ``WINDOW`` matches) and
answers one page of them: tools (the default), or, with ``group_by: "server"``, servers in the order
of their best matching tool, each with its best ``tools_per_server`` matches (names, descriptions and
scores: an agent picks a server first, then asks for its tools with ``server_filter``). While more
results follow, ``next_cursor`` names the next page (``search_cursor``); a call repeating the same
query, filter and grouping with that cursor gets it. Results are ranked afresh for every page: a
catalog that changed in between may move a result across a page boundary.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolmesh.contracts.search import SearchRequest, ToolHit
from toolmesh.payloads import invalid_payload
from toolmesh.search.service import SearchService
from toolmesh_gateway.bundle_view import BundleView
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.front_door.search_cursor import SearchCursors
from toolmesh_gateway.searching import MAX_LIMIT, search_visible

WINDOW = MAX_LIMIT
"""How many of the best matches a search pages through."""


class SearchToolsArguments(BaseModel):
    """The arguments of ``search_tools`` (others are ignored, as before they existed)."""

    model_config = ConfigDict(extra="ignore")

    query: str
    limit: int = Field(10, ge=1, le=MAX_LIMIT)
    server_filter: list[str] | None = None
    group_by: Literal["tool", "server"] = "tool"
    tools_per_server: int = Field(3, ge=1, le=10)
    cursor: str | None = Field(None, max_length=100)

    @classmethod
    def of(cls, arguments: dict[str, Any]) -> SearchToolsArguments:
        """``arguments`` validated (no query: every tool); ``ValidationFailed`` naming each bad field."""
        try:
            return cls.model_validate({**arguments, "query": arguments.get("query") or "*"})
        except ValidationError as exc:  # a tool error the model can read and correct, as for any tool
            raise invalid_payload(exc) from exc

    def search_identity(self, view: CatalogView) -> list[Any]:
        """What a cursor is bound to: the caller's namespace and bundle, and what this search asks."""
        bundle = view.bundle.id if isinstance(view, BundleView) and view.bundle is not None else None
        return [view.namespace, bundle, self.query, self.server_filter or None, self.group_by, self.tools_per_server]


class SearchPages:
    """Answers ``search_tools`` a page at a time in a caller's view."""

    def __init__(self, search: SearchService, cursors: SearchCursors) -> None:
        self._search = search
        self._cursors = cursors

    async def page(self, view: CatalogView, arguments: dict[str, Any]) -> dict[str, Any]:
        """One page of tools (or servers), with ``next_cursor`` when more follow."""
        wanted = SearchToolsArguments.of(arguments)
        identity = wanted.search_identity(view)
        offset = self._cursors.offset(identity, wanted.cursor, WINDOW) if wanted.cursor else 0
        end = offset + wanted.limit
        body: dict[str, Any]
        if wanted.group_by == "server":
            servers = _by_server(await self._found(view, wanted, WINDOW, schemas=False))
            body = {"servers": [_server_entry(view, hits, wanted.tools_per_server) for hits in servers[offset:end]]}
            more = len(servers) > end
        else:
            tools = await self._found(view, wanted, min(end + 1, WINDOW), schemas=True)
            body = {"tools": [_tool_entry(t) for t in tools[offset:end]]}
            more = len(tools) > end
        if more:
            body["next_cursor"] = self._cursors.issue(identity, end)
        return body

    async def _found(
        self, view: CatalogView, wanted: SearchToolsArguments, limit: int, *, schemas: bool
    ) -> list[ToolHit]:
        fields = {"query": wanted.query, "limit": limit, "server_filter": wanted.server_filter or None}
        try:
            request = SearchRequest.model_validate({**fields, "include_schemas": schemas})
        except ValidationError as exc:
            raise invalid_payload(exc) from exc
        return (await search_visible(self._search, request, view)).tools


def _tool_entry(hit: ToolHit) -> dict[str, Any]:
    return {
        "name": hit.name,
        "description": hit.description,
        "server": hit.source_server.name,
        "score": hit.score,
        "input_schema": hit.input_schema,
    }


def _by_server(hits: list[ToolHit]) -> list[list[ToolHit]]:
    """The hits of each server, servers in the order of their best hit."""
    servers: dict[str, list[ToolHit]] = {}
    for hit in hits:
        servers.setdefault(hit.source_server.id, []).append(hit)
    return list(servers.values())


def _server_entry(view: CatalogView, hits: list[ToolHit], shown: int) -> dict[str, Any]:
    server = hits[0].source_server
    return {
        "server": server.name,
        "score": hits[0].score,
        "tool_count": len(view.tools_of(server.id)),
        "matching_tools": len(hits),
        "tools": [{"name": h.name, "description": h.description, "score": h.score} for h in hits[:shown]],
    }
