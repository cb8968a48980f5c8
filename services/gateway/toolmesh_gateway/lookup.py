"""Finding servers, prompts and resources in the catalog: the one place a name becomes a server.

Every lookup by name of toolmesh's MCP front door and of the resource and prompt APIs goes through
these functions, on the caller's ``CatalogView``: another namespace's servers are not found.
"""

from __future__ import annotations

from toolmesh.errors import (
    PromptAmbiguous,
    PromptChanged,
    PromptNotFound,
    ResourceChanged,
    ResourceNotFound,
    ServerNotFound,
)
from toolmesh.naming import split_namespaced
from toolmesh_gateway.catalog import CatalogServer
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.routing import serving_warning


def server_by_name(catalog: CatalogView, name: str) -> CatalogServer | None:
    """A registered server by its name."""
    return catalog.server_named(name)


def server_by_id(catalog: CatalogView, server_id: str) -> CatalogServer:
    """A registered server by id; ``ServerNotFound`` otherwise."""
    server = catalog.server(server_id)
    if server is None:
        raise ServerNotFound(f"Server not found: {server_id}", {"server_id": server_id})
    return server


def serving(server: CatalogServer) -> CatalogServer:
    """The server when it takes requests (CONNECTED, DEGRADED); ``ServerUnavailable`` otherwise."""
    serving_warning(server)
    return server


def server_for_uri(catalog: CatalogView, uri: str, server_id: str | None = None) -> CatalogServer:
    """The server a resource URI is read from: ``server_id`` if given, else the collision rule of
    docs/usage.md; ``ResourceChanged`` when only a held resource template of that server (of any
    visible server, without ``server_id``) matches the URI."""
    if server_id is not None:
        server = serving(server_by_id(catalog, server_id))
        refuse_held_template(catalog, server, uri)
        return server
    found = catalog.server_for_uri(uri)
    if found is None:
        for held, _ in catalog.visible_offers():
            refuse_held_template(catalog, held, uri)
        raise ResourceNotFound(f"No connected server serves the resource {uri}", {"uri": uri})
    return found


def refuse_held_template(catalog: CatalogView, server: CatalogServer, uri: str) -> None:
    """``ResourceChanged`` when a read of ``uri`` on ``server`` would reach only a resource template
    held back for review (the poisoning scanner flagged it and no admin approved it)."""
    held = catalog.offer(server).held_template(uri)
    if held is not None:
        template, findings = held
        raise ResourceChanged(
            f"Resource template {server.name}:{template} was flagged by the poisoning scan ({'; '.join(findings)}); "
            "an admin must approve it before it is served",
            {"uri": uri, "uri_template": template, "server": server.name, "reason": "flagged", "fields": findings},
        )


def prompt_route(catalog: CatalogView, name: str, server_id: str | None = None) -> tuple[CatalogServer, str]:
    """``(server, original prompt name)``: explicit ``server_id``, then ``server.prompt``, then a unique
    original name (the tool-routing order, BR-005)."""
    if server_id is not None:
        server = serving(server_by_id(catalog, server_id))
        if name not in catalog.offer(server).prompts:
            refuse_held_prompt(catalog, server, name)
            raise PromptNotFound(f"Prompt {name} not found on {server.name}", {"prompt": name, "server": server.name})
        return server, name
    parts = split_namespaced(name)
    if parts is not None:
        named = server_by_name(catalog, parts[0])
        if named is not None and named.visible:
            if parts[1] in catalog.offer(named).prompts:
                return named, parts[1]
            refuse_held_prompt(catalog, named, parts[1])
    holders = catalog.servers_with_prompt(name)
    if len(holders) == 1:
        return holders[0], name
    if holders:
        raise PromptAmbiguous(
            f"Prompt {name} exists on several servers; use server.prompt",
            {"prompt": name, "servers": [s.name for s in holders]},
        )
    for server, _ in catalog.visible_offers():
        refuse_held_prompt(catalog, server, name)
    raise PromptNotFound(f"Prompt not found: {name}", {"prompt": name})


def refuse_held_prompt(catalog: CatalogView, server: CatalogServer, name: str) -> None:
    """``PromptChanged`` when ``server`` lists a prompt ``name`` that is held back for review."""
    hold = catalog.offer(server).prompt_hold(name)
    if hold is not None:
        what = {"changed": "changed", "flagged": f"was flagged by the poisoning scan ({'; '.join(hold.fields)})"}.get(
            hold.reason, "is new"
        )
        raise PromptChanged(
            f"Prompt {server.name}.{name} {what}; an admin must approve it before it is served",
            {"prompt": name, "server": server.name, "reason": hold.reason, "fields": hold.fields},
        )
