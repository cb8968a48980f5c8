"""Building the front door of a gateway app: the aggregate at ``/mcp``, endpoints and servers at
``/mcp/{name}`` (``app.state.mcp_routes``, served by ``entry.GatewayEntry``)."""

from __future__ import annotations

import re

from fastapi import FastAPI
from starlette.convertors import Convertor, register_url_convertor
from starlette.routing import Route

from toolmesh.platform.bus.topology import kept_for, mcp_sessions_bucket, spent_states_bucket, tasks_bucket
from toolmesh.platform.runtime import Backends
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.front_door.card_facts import CardFacts
from toolmesh_gateway.front_door.client_links import ClientLinks, release_client
from toolmesh_gateway.front_door.input_required import InputBridge
from toolmesh_gateway.front_door.named import NamedEndpoints
from toolmesh_gateway.front_door.search_cursor import SEARCH_CURSOR
from toolmesh_gateway.front_door.server import FrontDoor
from toolmesh_gateway.front_door.server_cards import CARD_SUFFIX, SERVER_JSON_SUFFIX
from toolmesh_gateway.front_door.session_channels import SessionChannels
from toolmesh_gateway.front_door.session_quota import NamespaceSessions
from toolmesh_gateway.front_door.session_table import McpSessionTable
from toolmesh_gateway.front_door.shared_sessions import SharedSessions
from toolmesh_gateway.front_door.task_status import TaskFeed
from toolmesh_gateway.front_door.transparent import Transparent
from toolmesh_gateway.tool_calls import ToolCalls

MCP_PATH = "/mcp"
REQUEST_STATE = "mcp request state"
"""The purpose the ``requestState`` keys are derived for from the credential key."""
NAMED_PATH = "/mcp/{name:endpoint}"


class EndpointName(Convertor[str]):
    """An endpoint's or server's name in ``/mcp/{name}``: one path segment, but neither ``server-card``
    nor ``server.json`` (the aggregate's Server Card and ``server.json``, REST routes; no server or
    endpoint may take the first name, ``toolmesh.naming.RESERVED_NAMES``, none has a dot)."""

    regex = f"(?!(?:{re.escape(CARD_SUFFIX[1:])}|{re.escape(SERVER_JSON_SUFFIX[1:])})$)[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("endpoint", EndpointName())


async def mount_front_door(app: FastAPI, backends: Backends, feed: CatalogFeed, calls: ToolCalls) -> FrontDoor:
    """Start the MCP servers on the app's authenticator, catalog feed (started), tool calls, forwarder
    and search service; their routes (the aggregate at ``/mcp``, each endpoint or server at
    ``/mcp/{name}``) go to ``app.state.mcp_routes``."""
    channels = SessionChannels()
    links = ClientLinks(backends.bus, calls.replica, channels)
    await links.start()
    settings = backends.settings
    kv = await mcp_sessions_bucket(backends.js, settings.mcp_session_ttl_seconds, replicas=settings.nats_replicas)

    async def release(session: str) -> None:
        await release_client(links, app.state.forwarder, feed, session)

    sessions = SharedSessions(
        McpSessionTable(backends.bus, kv),
        settings.mcp_session_ttl_seconds,
        release,
        settings.mcp_json_wait_seconds,
        NamespaceSessions(settings.namespace_quota),
        channels,
        links.relay,
    )
    # A requestState lives no longer than its spent mark, a task's ttlMs is no longer than its record:
    # the buckets' TTLs are the ones they were made with, perhaps by a replica with other settings.
    spent = await spent_states_bucket(backends.js, settings.request_timeout_seconds, replicas=settings.nats_replicas)
    tasks = await tasks_bucket(backends.js, settings.task_ttl_seconds, replicas=settings.nats_replicas)
    front = FrontDoor(
        settings,
        app.state.authenticator,
        feed,
        calls,
        app.state.search,
        app.state.credential_box.purpose_keys(SEARCH_CURSOR),
        app.state.rate_limiter,
        app.state.forwarder,
        links,
        InputBridge(
            links,
            settings.request_timeout_seconds,
            app.state.credential_box.purpose_keys(REQUEST_STATE),
            spent,
            await kept_for(spent, settings.request_timeout_seconds),
        ),
        sessions,
        tasks,
        await kept_for(tasks, settings.task_ttl_seconds),
        TaskFeed(backends.js, tasks),
    )
    transparent = Transparent(
        feed, calls, app.state.forwarder, links, front.upstream, sessions, front.tasks, front.task_feed
    )
    named = NamedEndpoints(app.state.authenticator, app.state.rate_limiter, feed, front, transparent)
    front.managers.append(transparent.manager)
    front.on_changes.append(transparent.announce)
    await front.start()
    app.state.mcp_routes = (Route(MCP_PATH, front), Route(NAMED_PATH, named))  # ASGI apps: every method
    app.state.card_facts = CardFacts(
        app.state.authenticator, app.state.rate_limiter, feed, app.state.endpoints, front.server, transparent.server
    )
    return front
