"""Every page of an upstream's list methods (tools, resources, resource templates, prompts).

An upstream that speaks the 2026-07-28 era besides the handshake may offer more in that era (what
needs its input-required rounds, say): its lists are the union of both eras' (the handshake era's
item wins where both list one), so what either era's clients may use is discovered and pinned; what
only that era lists is noted in the session's ``modern_only``, to be reached in that era."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import mcp_types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toolmesh_session_worker.upstream.errors import UpstreamError
from toolmesh_session_worker.upstream.stateless import own_envelope

if TYPE_CHECKING:
    from toolmesh_session_worker.upstream.surface import Upstream

_ITEMS = {
    mcp_types.ListToolsResult: "tools",
    mcp_types.ListResourcesResult: "resources",
    mcp_types.ListResourceTemplatesResult: "resource_templates",
    mcp_types.ListPromptsResult: "prompts",
}
_METHODS = {
    mcp_types.ListToolsResult: "tools/list",
    mcp_types.ListResourcesResult: "resources/list",
    mcp_types.ListResourceTemplatesResult: "resources/templates/list",
    mcp_types.ListPromptsResult: "prompts/list",
}
_KEYS = {"tools": "name", "resources": "uri", "resource_templates": "uri_template", "prompts": "name"}


async def list_all(session: Upstream, request_type: Any, result_type: Any, what: str, timeout: float) -> list[Any]:
    """The items of every page of one list method, following ``nextCursor`` (``timeout`` in total),
    in both eras when the upstream speaks both."""
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
            break
        _check_cursor(session, what, cursor, seen)
    if session.modern_versions and _handshake_too(session):
        items += await _modern_only(session, result_type, items, what, deadline)
    return items


def _handshake_too(session: Upstream) -> bool:
    """Whether the upstream speaks the handshake era too (then the lists above were that era's)."""
    result = session.initialize_result
    return result is not None and result.protocol_version not in MODERN_PROTOCOL_VERSIONS


async def _modern_only(session: Upstream, result_type: Any, listed: list[Any], what: str, deadline: float) -> list[Any]:
    """The items the upstream lists in the 2026-07-28 era only."""
    field = _ITEMS[result_type]
    key = _KEYS[field]
    known = {getattr(item, key) for item in listed}
    envelope = own_envelope(session.modern_versions[-1])
    extra: list[Any] = []
    seen: set[str] = set()
    cursor: str | None = None
    while True:
        limit = max(deadline - anyio.current_time(), 0.0)
        raw = await session.request(
            _METHODS[result_type], {"cursor": cursor} if cursor else None, timeout=limit, envelope=envelope
        )
        try:
            page = result_type.model_validate(raw, by_name=False)
        except ValidationError as exc:
            words = f"invalid answer while {what} (2026-07-28)"
            raise UpstreamError(f"{session.server_name}: {words}: {exc}", summary=words) from exc
        extra += [item for item in getattr(page, field) if getattr(item, key) not in known]
        cursor = page.next_cursor
        if not cursor:
            session.modern_only[field] = tuple(sorted(str(getattr(item, key)) for item in extra))
            return extra
        _check_cursor(session, what, cursor, seen)


def _check_cursor(session: Upstream, what: str, cursor: str, seen: set[str]) -> None:
    """``UpstreamError`` when the upstream repeats a cursor (a listing that would never end)."""
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
