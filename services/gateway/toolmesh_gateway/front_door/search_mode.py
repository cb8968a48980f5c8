"""Two of the tools of ``?mode=search``: ``search_tools`` (the hybrid search as a tool, a page at a
time: ``search_pages``) and ``run`` (Python in the sandbox, which calls tools and searches through
packs); ``call_tool`` is the front door's own call."""

from __future__ import annotations

from typing import Any

import mcp_types

from toolmesh.contracts.search import SearchRequest
from toolmesh.contracts.tools import ToolCallRequest
from toolmesh.search.service import SearchService
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.front_door import listing
from toolmesh_gateway.front_door.code_mode import CallerPacks, CodeRunner
from toolmesh_gateway.front_door.search_cursor import SearchCursors
from toolmesh_gateway.front_door.search_pages import SearchPages
from toolmesh_gateway.searching import search_visible
from toolmesh_gateway.tool_calls import ToolCalls


class SearchMode:
    """``search_tools`` and ``run`` for a caller in its view."""

    def __init__(self, search: SearchService, calls: ToolCalls, code: CodeRunner, cursors: SearchCursors) -> None:
        self._search = search
        self._calls = calls
        self._code = code
        self._pages = SearchPages(search, cursors)

    async def search_tools(self, view: CatalogView, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """A page of the tools ``view`` shows that match the query, with their input schemas (or of the
        servers they belong to, with their best tools), and the next page's cursor when more follow."""
        return listing.text_result(await self._pages.page(view, arguments))

    async def run(self, view: CatalogView, caller: Caller, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """Run the ``code`` argument in the sandbox, its packs calling tools as ``caller`` in ``view``."""
        timeout = arguments.get("timeout_seconds")

        async def call_tool(request: ToolCallRequest) -> dict[str, Any]:
            return await self._calls.call(request, caller, view=view, surface="code")

        async def search_tools(query: str, limit: int, servers: list[str] | None) -> list[dict[str, Any]]:
            return await self._search_for_code(view, query, limit, servers)

        outcome = await self._code.run(
            str(arguments.get("code", "")),
            CallerPacks(view, call_tool, search_tools),
            float(timeout) if timeout else None,
        )
        return listing.text_result(outcome.body(), is_error=not outcome.ok)

    async def _search_for_code(
        self, view: CatalogView, query: str, limit: int, servers: list[str] | None
    ) -> list[dict[str, Any]]:
        request = SearchRequest.model_validate({"query": query, "limit": limit, "server_filter": servers})
        found = await search_visible(self._search, request, view)
        return [
            {
                "name": t.name,
                "pack": t.source_server.name,
                "tool": t.original_name,
                "description": t.description,
                "score": t.score,
            }
            for t in found.tools
        ]
