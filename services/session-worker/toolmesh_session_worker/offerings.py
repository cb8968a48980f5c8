"""Publishing what one upstream offers: its tool, resource and prompt snapshots, the tool definitions
held for approval, a ``tool.discovered`` per new tool, and what it said at initialize (again whenever
a listing finds another set of what it lists in the 2026-07-28 era only).

Tool snapshots stay within the total-tools limit and their namespace's (``toolmesh_session_worker.tool_inventory``:
concurrent discoveries on any worker cannot pass them together).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import mcp_types

from toolmesh.contracts.events import Event, ServerDescribed, ToolDiscovered, ToolsChanged, ToolsDiscovered
from toolmesh.errors import LimitExceeded
from toolmesh.platform.metrics import record_limit_rejection
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store.queries import tool_pins
from toolmesh.platform.store.retired_pins import pins_left
from toolmesh_session_worker.discovery import (
    ToolLimits,
    description,
    newly_discovered,
    newly_held,
    prompts_snapshot,
    resources_snapshot,
    tools_snapshot,
)
from toolmesh_session_worker.tool_inventory import OverLimit, publish_within_limit
from toolmesh_session_worker.upstream import Upstream, UpstreamError, listing

log = logging.getLogger("toolmesh.session")
Publish = Callable[[Event], Awaitable[int]]


class Offerings:
    """Publishes the offerings of one server's upstream session."""

    def __init__(self, backends: Backends, server_id: str, name: str, namespace: str, publish: Publish) -> None:
        self._b = backends
        self.server_id = server_id
        self.name = name
        self.namespace = namespace
        self._publish = publish
        self._described: ServerDescribed | None = None

    async def announce(self, events: list[ToolDiscovered]) -> None:
        """Publish a ``tool.discovered`` per new tool (once every snapshot is out)."""
        for event in events:
            await self._publish(event)

    async def tools(
        self, session: Upstream, tools: list[mcp_types.Tool] | None = None
    ) -> tuple[int, int, list[ToolDiscovered]]:
        """Run ``tools/list`` (unless ``tools`` were just listed) and publish the snapshot and the
        definitions it holds for approval; (its sequence, the tools listed, the events of tools the
        server did not list before)."""
        if tools is None:
            tools = await session.list_tools()
        snapshot = tools_snapshot(self.server_id, self.name, self.namespace, tools, ToolLimits.of(self._b.settings))
        server, stored = await tool_pins(self._b.db, self.server_id)
        first = server is not None and not server["tools_seen"]
        left = await pins_left(self._b.db, self.namespace, self.name) if first else None
        changed = newly_held(snapshot, server, stored, left)
        if changed is not None:
            log.warning(
                "tool definitions held for approval: %s",
                ", ".join(c.original_name for c in changed.changes),
                extra={"server": self.name},
            )
        seq = await self._within_total(snapshot, changed)
        seq = await self._describe(session) or seq
        return seq, len(tools), newly_discovered(snapshot, stored)

    async def _within_total(self, snapshot: ToolsDiscovered, held: ToolsChanged | None) -> int:
        """Publish ``snapshot`` (and right after it ``held``) unless it would take every namespace's
        tools past ``max_total_tools`` (``LimitExceeded``; the server keeps the tools it had); returns
        the snapshot's sequence."""
        limit = self._b.settings.max_total_tools
        published: list[int] = []

        async def publish() -> int:
            published.append(await self._publish(snapshot))
            if held is not None:
                published.append(await self._publish(held))
            return published[-1]

        own = self._b.settings.namespace_quota(self.namespace).max_tools
        try:
            await publish_within_limit(
                self._b.db, self.server_id, len(snapshot.tools), limit, publish, (self.namespace, own)
            )
        except OverLimit as exc:
            if exc.namespace is not None:
                past, cap = f"namespace '{self.namespace}' past its {own} tools", {"namespace_max_tools": own}
                record_limit_rejection("namespace_tools")
            else:
                past, cap = f"the total past {limit}", {"max_total_tools": limit}
                record_limit_rejection("tools")
            count = len(snapshot.tools)
            raise LimitExceeded(
                f"LIMIT_EXCEEDED: {count} tools of {self.name} would take {past} ({exc.others} registered)",
                {**cap, "tools": count, "others": exc.others},
            ) from exc
        return published[0]

    async def everything(self, session: Upstream, tools: list[mcp_types.Tool] | None = None) -> tuple[int, int]:
        """Publish what the upstream said at initialize, then every list it offers (``tools`` when
        just listed); (the last sequence, the tools listed)."""
        self._described = None  # a new session: said again
        seq, count, new = await self.tools(session, tools)
        capabilities = session.capabilities
        if capabilities.resources is not None:
            seq = await self.resources(session)
        if capabilities.prompts is not None:
            seq = await self.prompts(session)
        await self.announce(new)
        return seq, count

    async def resources(self, session: Upstream) -> int:
        """Run ``resources/list`` and ``resources/templates/list`` and publish the snapshot."""
        resources = await listing.list_resources(session)
        try:
            templates = await listing.list_resource_templates(session)
        except UpstreamError as exc:  # a server with resources but no templates may not serve the method
            log.info("no resource templates: %s", exc, extra={"server": self.name})
            templates = []
        seq = await self._publish(resources_snapshot(self.server_id, self.name, self.namespace, resources, templates))
        return await self._describe(session) or seq

    async def prompts(self, session: Upstream) -> int:
        """Run ``prompts/list`` and publish the snapshot."""
        prompts = await listing.list_prompts(session)
        seq = await self._publish(prompts_snapshot(self.server_id, self.name, self.namespace, prompts))
        return await self._describe(session) or seq

    async def _describe(self, session: Upstream) -> int | None:
        """Publish what the upstream said at initialize unless it was published as it is now (its
        sequence; None when there was nothing new to say)."""
        if session.initialize_result is None:
            return None
        described = description(
            self.server_id,
            self.namespace,
            session.initialize_result,
            session.modern_versions,
            session.modern_only,
            session.modern_tasks,
        )
        if self._described is not None and described.model_dump(exclude={"event_id", "occurred_at"}) == (
            self._described.model_dump(exclude={"event_id", "occurred_at"})
        ):
            return None
        self._described = described
        return await self._publish(described)
