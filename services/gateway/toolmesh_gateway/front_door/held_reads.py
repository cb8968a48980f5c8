"""``/mcp/{server}`` forwards ``resources/read`` and ``resources/subscribe`` as they are, except of a
URI only a held resource template matches (the poisoning scanner flagged it, no admin approved it):
that read or subscription is refused before it reaches the upstream."""

from __future__ import annotations

from toolmesh.errors import ToolmeshError
from toolmesh_gateway import lookup
from toolmesh_gateway.catalog import CatalogServer
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.front_door.rpc_errors import mcp_error


async def refuse_held_read(feed: CatalogFeed, server: CatalogServer, uri: str) -> None:
    """``RESOURCE_CHANGED`` as a JSON-RPC error when only a held template of ``server`` matches ``uri``
    (checked again once the catalog caught up with the stream: an approval may be on its way)."""
    try:
        if feed.catalog.offer(server.id).held_template(uri) is not None:
            await feed.catch_up()
            lookup.refuse_held_template(feed.catalog.view(server.namespace), server, uri)
    except ToolmeshError as exc:
        raise mcp_error(exc) from exc
