"""Every page of an upstream's list methods (tools, resources, resource templates, prompts)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import mcp_types

from toolmesh_session_worker.upstream.errors import UpstreamError

if TYPE_CHECKING:
    from toolmesh_session_worker.upstream.surface import Upstream

_ITEMS = {
    mcp_types.ListToolsResult: "tools",
    mcp_types.ListResourcesResult: "resources",
    mcp_types.ListResourceTemplatesResult: "resource_templates",
    mcp_types.ListPromptsResult: "prompts",
}


async def list_all(session: Upstream, request_type: Any, result_type: Any, what: str, timeout: float) -> list[Any]:
    """The items of every page of one list method, following ``nextCursor`` (``timeout`` in total)."""
    what = f"listing {what}"
    deadline = anyio.current_time() + timeout
    items: list[Any] = []
    seen: set[str] = set()
    cursor: str | None = None
    while True:
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        limit = max(deadline - anyio.current_time(), 0.0)
        page = await session.send(request_type(params=params), result_type, what=what, limit=limit)
        items.extend(getattr(page, _ITEMS[result_type]))
        cursor = page.next_cursor
        if not cursor:
            return items
        if cursor in seen:
            raise UpstreamError(
                f"{session.server_name}: {what} repeated cursor {cursor!r}", summary=f"{what} repeated a cursor"
            )
        seen.add(cursor)


async def list_resources(session: Upstream, timeout: float = 60.0) -> list[mcp_types.Resource]:
    """All resources of the server."""
    return await list_all(session, mcp_types.ListResourcesRequest, mcp_types.ListResourcesResult, "resources", timeout)


async def list_resource_templates(session: Upstream, timeout: float = 60.0) -> list[mcp_types.ResourceTemplate]:
    """All resource templates of the server."""
    return await list_all(
        session,
        mcp_types.ListResourceTemplatesRequest,
        mcp_types.ListResourceTemplatesResult,
        "resource templates",
        timeout,
    )


async def list_prompts(session: Upstream, timeout: float = 60.0) -> list[mcp_types.Prompt]:
    """All prompts of the server."""
    return await list_all(session, mcp_types.ListPromptsRequest, mcp_types.ListPromptsResult, "prompts", timeout)
