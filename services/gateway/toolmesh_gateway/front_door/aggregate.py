"""Resources, prompts, completions and logging of the aggregate ``/mcp``.

Resource URIs are served unchanged and routed by URI (the collision rule is in ``offers`` and
docs/usage.md); each listed item says which server it comes from in ``_meta["toolmesh/server"]``.
Prompts are named like tools in "all" mode (``server__prompt``, ``names``), and a prompt's
original name works too when exactly one server has it. ``logging/setLevel`` reaches every
serving upstream that offers logging. A request for one server goes to its upstream through
``UpstreamRequests`` (``upstream_requests``: the path its era takes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from toolmesh.contracts.rpc import SetLevelRpc, SubscribeRpc
from toolmesh.errors import ToolmeshError
from toolmesh_gateway import lookup
from toolmesh_gateway.bundle_view import BundleView
from toolmesh_gateway.catalog import CatalogServer
from toolmesh_gateway.catalog_view import CatalogView
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.front_door.client_links import ClientLinks, Ctx
from toolmesh_gateway.front_door.eras import for_client
from toolmesh_gateway.front_door.names import NameMap
from toolmesh_gateway.front_door.rpc_errors import mcp_error
from toolmesh_gateway.front_door.sessions import request_caller
from toolmesh_gateway.front_door.upstream_requests import UpstreamRequests, upstream_params

log = logging.getLogger("toolmesh.gateway.mcp")
SERVER_META = "toolmesh/server"


def _tagged(item: dict[str, Any], server: str) -> dict[str, Any]:
    meta = dict(item.get("_meta") or {})
    meta[SERVER_META] = server
    return {**item, "_meta": meta}


class Aggregate:
    """The handlers; ``install`` registers them on the aggregate ``Server``."""

    def __init__(
        self,
        view_of: Callable[[Ctx], CatalogView],
        upstream: UpstreamRequests,
        forwarder: Forwarder,
        links: ClientLinks,
        separator: str,
    ) -> None:
        self._view = view_of  # what the connection's caller sees: its namespace
        self._upstream = upstream
        self._forwarder = forwarder
        self._links = links
        self._separator = separator
        self._prompt_names: dict[tuple[str | None, object], tuple[int, NameMap]] = {}  # by namespace and bundle

    def install(self, server: Server[Any]) -> None:
        """Register the handlers of every method beyond tools."""
        handlers: dict[str, Callable[[Ctx, Any], Awaitable[Any]]] = {
            "resources/list": self._list_resources,
            "resources/templates/list": self._list_templates,
            "resources/read": self._read_resource,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "prompts/list": self._list_prompts,
            "prompts/get": self._get_prompt,
            "completion/complete": self._complete,
            "logging/setLevel": self._set_level,
        }
        for method, handler in handlers.items():
            server.add_request_handler(method, mcp_types.RequestParams, handler)

    # -- resources -------------------------------------------------------------------------------

    async def _list_resources(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        listed = []
        view = self._view(ctx)
        for server, offer in view.visible_offers():
            for uri, item in sorted(offer.resources.items()):
                owner = view.server_for_uri(uri)
                if owner is not None and owner.id == server.id:
                    listed.append(_tagged(item, server.name))
        return for_client(ctx, {"resources": listed})

    async def _list_templates(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        listed = []
        view = self._view(ctx)
        for server, offer in view.visible_offers():
            for template, item in sorted(offer.templates.items()):
                owner = view.server_for_template(template)
                if owner is not None and owner.id == server.id:
                    listed.append(_tagged(item, server.name))
        return for_client(ctx, {"resourceTemplates": listed})

    def _by_uri(self, ctx: Ctx) -> tuple[CatalogServer, str]:
        uri = str((ctx.params or {}).get("uri", ""))
        try:
            return lookup.server_for_uri(self._view(ctx), uri), uri
        except ToolmeshError as exc:
            raise mcp_error(exc) from exc

    async def _read_resource(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        server, _uri = self._by_uri(ctx)
        return await self._upstream.forward(ctx, server, "resources/read", upstream_params(ctx))

    async def _subscribe(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        server, uri = self._by_uri(ctx)
        await self._control(ctx, server, "subscribe", uri)
        return {}

    async def _unsubscribe(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        server, uri = self._by_uri(ctx)
        await self._control(ctx, server, "unsubscribe", uri)
        return {}

    async def _control(self, ctx: Ctx, server: CatalogServer, verb: str, uri: str) -> None:
        link = self._links.link(ctx)
        link.servers.add(server.id)
        try:
            body = SubscribeRpc(uri=uri, client=link.ref, principal=_key_of(ctx))
            await self._forwarder.control(server, verb, body, request_caller(ctx.request))
        except ToolmeshError as exc:
            raise mcp_error(exc, ctx.session.client_capabilities) from exc

    # -- prompts ---------------------------------------------------------------------------------

    def prompt_names(self, view: CatalogView) -> NameMap:
        """Public prompt names of a view's current catalog (rebuilt when the prompts change): a
        namespace's, or an endpoint's (whose bundle selects fewer)."""
        version = view.catalog.prompts_version
        bundle = view.bundle if isinstance(view, BundleView) else None
        key = (view.namespace, (bundle.id, bundle.include, bundle.exclude) if bundle is not None else None)
        current = self._prompt_names.get(key)
        if current is None or current[0] != version:
            pairs = ((s.name, p) for s, o in view.visible_offers() for p in o.prompts)
            current = (version, NameMap.build(pairs, self._separator))
            self._prompt_names[key] = current
        return current[1]

    async def _list_prompts(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        view = self._view(ctx)
        names = self.prompt_names(view)
        listed = []
        for server, offer in view.visible_offers():
            for original, item in sorted(offer.prompts.items()):
                public = names.public(server.name, original)
                description = f"[{server.name}] {item.get('description') or original}"
                listed.append(
                    {
                        **_tagged(item, server.name),
                        "name": public,
                        "title": f"{server.name}.{original}",
                        "description": description,
                    }
                )
        return for_client(ctx, {"prompts": listed})

    def _prompt(self, ctx: Ctx, name: str) -> tuple[CatalogServer, str]:
        view = self._view(ctx)
        pair = self.prompt_names(view).resolve(name)
        if pair is not None:
            server = lookup.server_by_name(view, pair[0])
            if server is not None:
                return server, pair[1]
        try:
            held = self._held_prompt_names(view).resolve(name)
            if held is not None and (server := lookup.server_by_name(view, held[0])) is not None:
                lookup.refuse_held_prompt(view, server, held[1])
            return lookup.prompt_route(view, name)
        except ToolmeshError as exc:
            raise mcp_error(exc) from exc

    def _held_prompt_names(self, view: CatalogView) -> NameMap:
        """Public names of the prompts held back for review, as they were listed before the hold."""
        pairs = ((s.name, p) for s, o in view.visible_offers() for p in o.prompt_pins or {} if o.prompt_hold(p))
        return NameMap.build(pairs, self._separator)

    async def _get_prompt(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        server, original = self._prompt(ctx, str((ctx.params or {}).get("name", "")))
        return await self._upstream.forward(ctx, server, "prompts/get", upstream_params(ctx, name=original))

    # -- completions and logging -----------------------------------------------------------------

    async def _complete(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        ref = dict((ctx.params or {}).get("ref") or {})
        if ref.get("type") == "ref/prompt":
            server, original = self._prompt(ctx, str(ref.get("name", "")))
            ref["name"] = original
        else:
            uri = str(ref.get("uri", ""))
            view = self._view(ctx)
            found = view.server_for_template(uri) or view.server_for_uri(uri)
            if found is None:
                raise MCPError(code=mcp_types.INVALID_PARAMS, message=f"No connected server offers {uri}")
            server = found
        return await self._upstream.forward(ctx, server, "completion/complete", upstream_params(ctx, ref=ref))

    async def _set_level(self, ctx: Ctx, _: Any) -> dict[str, Any]:
        level = str((ctx.params or {}).get("level", "info"))
        link = self._links.link(ctx)
        link.log_level = level
        targets = [s for s, o in self._view(ctx).visible_offers() if "logging" in o.description.capabilities]
        link.servers.update(s.id for s in targets)
        body = SetLevelRpc(level=level, client=link.ref, principal=_key_of(ctx))
        outcomes = await asyncio.gather(
            *(self._forwarder.control(s, "set_level", body) for s in targets), return_exceptions=True
        )
        for server, outcome in zip(targets, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.warning("logging/setLevel did not reach %s: %s", server.name, outcome)
        return {}


def _key_of(ctx: Ctx) -> str | None:
    """The key id of the request's caller (a per-user server answers it on that principal's session)."""
    caller = request_caller(ctx.request)
    return caller.principal.key_id if caller is not None else None
