"""Telling the aggregate's clients that its lists changed: a handshake-era session gets
``notifications/{tools,resources,prompts}/list_changed``, a 2026-07-28 ``subscriptions/listen``
stream the matching event; the other endpoints announce their own changes right after
(``on_changes``)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus
from starlette.types import Scope

from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.front_door.eras import list_changes
from toolmesh_gateway.front_door.shared_sessions import Announceable

log = logging.getLogger("toolmesh.gateway.mcp")
ANNOUNCE_TIMEOUT_SECONDS = 2.0
MAX_TRACKED_SESSIONS = 10_000


class ListAnnouncer:
    """The aggregate's sessions and listen streams, told of every change of the catalog's lists."""

    def __init__(self, feed: CatalogFeed, tools_changed: Callable[[], None]) -> None:
        self._feed = feed
        self._tools_changed = tools_changed
        self._sessions: dict[str, Announceable] = {}  # handshake-era connections, by session id
        self.bus = InMemorySubscriptionBus()
        """Where 2026-07-28 connections listen (``subscriptions/listen``)."""
        self.on_changes: list[Callable[[], Awaitable[None]]] = []
        """Other endpoints' announcers, run after each change."""

    async def track(self, ctx: ServerRequestContext[Any, Any], _: mcp_types.NotificationParams) -> None:
        """Remember a handshake-era connection (by its session id) to announce list changes to it."""
        headers = getattr(ctx.request, "headers", None)
        key = headers.get("mcp-session-id") if headers is not None else None
        self._remember(key or str(id(ctx.session)), ctx.session)

    def adopted(self, session_id: str, connection: Connection, _: Scope) -> None:
        """Announce list changes to a session opened on another replica, now served here too."""
        self._remember(session_id, connection)

    def _remember(self, key: str, session: Announceable) -> None:
        self._sessions[key] = session
        while len(self._sessions) > MAX_TRACKED_SESSIONS:  # closed sessions are only noticed on a send
            self._sessions.pop(next(iter(self._sessions)))

    async def run(self) -> None:
        """Announce each change of the catalog's lists, until cancelled."""
        seen = self._feed.versions()
        while True:
            now = await self._feed.wait_any_changed(seen)
            tools, resources, prompts = (a != b for a, b in zip(now, seen, strict=True))
            seen = now
            if tools:
                self._tools_changed()
            for event in list_changes(tools, resources, prompts):
                await self.bus.publish(event)
            for key, session in list(self._sessions.items()):
                try:
                    with anyio.fail_after(ANNOUNCE_TIMEOUT_SECONDS):
                        if tools:
                            await session.send_tool_list_changed()
                        if resources:
                            await session.send_resource_list_changed()
                        if prompts:
                            await session.send_prompt_list_changed()
                except Exception as exc:  # the client went away: forget its connection
                    log.debug("dropping MCP session %s: %s", key, exc)
                    self._sessions.pop(key, None)
            for announce in self.on_changes:
                await announce()
