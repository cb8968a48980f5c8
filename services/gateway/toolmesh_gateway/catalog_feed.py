"""Keeps the gateway's ``Catalog`` fresh: a snapshot of the read model, then every later event.

The snapshot and the projector's checkpoint are read in one transaction, so they describe the
same stream sequence ``N``; an ordered JetStream consumer then delivers from ``N + 1``. Nothing
is missed between the load and the subscription, and nothing is applied twice. One feed per
gateway serves both the tool-call path (``catch_up`` on a routing miss) and the MCP front door
(``wait_changed`` for ``tools/list_changed``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from toolmesh.categories import ToolCategory, categorize
from toolmesh.contracts.event_types import decode_event
from toolmesh.contracts.events import EVENTS_STREAM, EVENTS_SUBJECTS, Event
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.errors import BackendUnavailable
from toolmesh.lifecycle import ServerStatus
from toolmesh.pinning import ApprovedText, Hold, Pin, prompt_definition_hash
from toolmesh.platform.polling import poll_until
from toolmesh.platform.store.queries import Row
from toolmesh_gateway.bundles import Bundle
from toolmesh_gateway.catalog import Catalog, CatalogServer, CatalogTool
from toolmesh_gateway.catalog_snapshot import CatalogSnapshot, catalog_snapshot
from toolmesh_gateway.offers import ServerDescription, ServerOffer
from toolmesh_gateway.policies.book import PolicyBook

log = logging.getLogger("toolmesh.gateway.catalog")
CATCH_UP_SECONDS = 1.0
"""How long a call that found no route waits for the catalog to reach the stream's last event."""


class CatalogFeed:
    """Loads a catalog and follows the event stream into it."""

    def __init__(self, js: JetStreamContext, db: asyncpg.Pool, catalog: Catalog | None = None) -> None:
        self._js = js
        self._db = db
        self.catalog = catalog or Catalog()
        self.policies = PolicyBook()
        """The policies on tool calls, loaded and followed with the catalog."""
        self._sub: JetStreamContext.PushSubscription | None = None
        self._changed = asyncio.Condition()
        self.listeners: list[Callable[[Event], None]] = []
        """Called with every event after the catalog applied it (e.g. the authenticator's revocations)."""

    async def start(self) -> None:
        """Load the snapshot and subscribe from the sequence after it."""
        snapshot = await catalog_snapshot(self._db)
        servers = [
            CatalogServer(
                r["id"],
                r["name"],
                ServerStatus(r["status"]),
                r["namespace"],
                r["transport_type"],
                NewToolsPolicy(r["new_tools"]),
                r["registered_seq"],
            )
            for r in snapshot.servers
        ]
        tools = [(r["server_id"], _tool(r)) for r in snapshot.tools]
        seen = [r["id"] for r in snapshot.servers if r["tools_seen"]]
        offers: dict[str, ServerOffer] = {}
        for r in snapshot.servers:
            approved = (
                ApprovedText(r["instructions_hash"], r["approved_instructions"]) if r["instructions_hash"] else None
            )
            description = ServerDescription(
                r["protocol_version"],
                dict(r["capabilities"] or {}),
                dict(r["server_info"] or {}),
                r["instructions"],
                approved,
                tuple(r["modern_versions"]),
                {kind: frozenset(keys) for kind, keys in dict(r["modern_only"] or {}).items()},
                bool(r["modern_tasks"]),
            )
            offers[r["id"]] = ServerOffer(description=description)
        for row in snapshot.resources:
            offers[row["server_id"]].resources[str(row["item"]["uri"])] = row["item"]
        templates: dict[str, dict[str, dict[str, Any]]] = {}
        for row in snapshot.templates:
            templates.setdefault(row["server_id"], {})[str(row["item"]["uriTemplate"])] = row["item"]
        names = {r["id"]: (r["namespace"], r["name"]) for r in snapshot.servers}
        for server_id, listed in templates.items():
            offers[server_id].load_templates(listed, snapshot.left.templates.get(names[server_id]))
        _load_prompts(offers, snapshot)
        bundles = [
            Bundle.of(r["id"], r["name"], r["namespace"], r["include"], r["exclude"], r["overrides"], r["description"])
            for r in snapshot.endpoints
        ]
        self.policies.load(snapshot.policies)
        self.catalog.load(
            servers,
            tools,
            snapshot.seq,
            seen=seen,
            offers=offers,
            bundles=bundles,
            left=snapshot.left,
        )
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=snapshot.seq + 1)
        self._sub = await self._js.subscribe(
            EVENTS_SUBJECTS, stream=EVENTS_STREAM, cb=self._on_event, ordered_consumer=True, config=config
        )
        log.info("catalog loaded at sequence %d: %d servers", snapshot.seq, len(servers), extra={"role": "gateway"})

    async def close(self) -> None:
        """Stop following the stream."""
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception as exc:  # the connection may already be closed; nothing left to release
                log.debug("catalog feed unsubscribe failed: %s", exc)

    async def catch_up(self, timeout: float = CATCH_UP_SECONDS) -> bool:
        """Wait (bounded) until the catalog has applied every event in the stream now; True when it has."""
        try:
            info = await self._js.stream_info(EVENTS_STREAM)
        except Exception as exc:  # nats raises several unrelated types when JetStream is unreachable
            raise BackendUnavailable(f"JetStream unreachable: {exc}") from exc
        target = int(info.state.last_seq)
        # The feed applies events in its own subscription task; poll its sequence (rare path only).
        if await poll_until(lambda: self.catalog.applied_seq >= target, timeout, interval=0.001, max_interval=0.02):
            return True
        log.warning("catalog at %d, stream at %d after %.1fs", self.catalog.applied_seq, target, timeout)
        return False

    async def wait_changed(self, seen_version: int) -> int:
        """Wait until the visible tool set changed after ``seen_version``; returns the new version."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.catalog.version != seen_version)
            return self.catalog.version

    async def wait_any_changed(self, seen: tuple[int, int, int]) -> tuple[int, int, int]:
        """Wait until the visible tools, resources or prompts changed after ``seen`` (as ``versions()``)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.versions() != seen)
            return self.versions()

    def versions(self) -> tuple[int, int, int]:
        """The catalog's tool, resource and prompt versions."""
        return (self.catalog.version, self.catalog.resources_version, self.catalog.prompts_version)

    async def _on_event(self, msg: Msg) -> None:
        seq = msg.metadata.sequence.stream
        try:
            event = decode_event(msg.subject, msg.data)
        except ValidationError as exc:
            log.error("event %d on %s is malformed and was skipped: %s", seq, msg.subject, exc)
            event = None
        if event is None:
            self.catalog.skip(seq)
            return
        before = self.versions()
        self.catalog.apply(event, seq)
        self.policies.apply(event)
        if self.versions() != before:
            async with self._changed:
                self._changed.notify_all()
        for listener in self.listeners:
            listener(event)


def _pin(row: Row) -> Pin | None:
    if row["definition_hash"] is None:
        return None
    hold = Hold(row["held_reason"], list(row["held_fields"] or [])) if row["held_reason"] else None
    return Pin(row["definition_hash"], row["approved_hash"], hold)


def _load_prompts(offers: dict[str, ServerOffer], snapshot: CatalogSnapshot) -> None:
    """The prompts of each server whose prompt list was seen, with their pins (a prompt stored before
    pinning existed is approved as it is, like the projector approves it on the next list)."""
    listed: dict[str, dict[str, Any]] = {r["id"]: {} for r in snapshot.servers if r["prompts_seen"]}
    pins: dict[str, dict[str, Pin]] = {server_id: {} for server_id in listed}
    for row in snapshot.prompts:
        name, item = str(row["original_name"]), dict(row["item"])
        hashed = prompt_definition_hash(item)
        listed.setdefault(row["server_id"], {})[name] = item
        pins.setdefault(row["server_id"], {})[name] = _pin(row) or Pin(hashed, hashed)
    for server_id, prompts in listed.items():
        offers[server_id].load_prompts(prompts, pins[server_id])


def _tool(row: Row) -> CatalogTool:
    pin = _pin(row)
    stored = row["category"]
    category = ToolCategory(stored) if stored else categorize(row["original_name"], row["description"])
    return CatalogTool(
        row["original_name"],
        row["description"],
        dict(row["input_schema"] or {}),
        pin,
        category,
        title=row["title"],
        annotations=row["annotations"],
        output_schema=row["output_schema"],
        task_support=row["task_support"],
        skills=tuple(row["skill_ids"] or ()),
    )
