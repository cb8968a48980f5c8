"""The index as a projection of events: tools indexed on discovery, payloads moved by status and
classification, points removed with their server, skill vectors kept as running sums.

A discovered tool is searchable by its words (BM25F) as soon as its event is applied; its vector
follows when the process's embedding lane gets to it (``run_embedder``, oldest first), so freshness
never waits on embedding throughput. Rows stored without a vector (a crash before the lane caught
up) are queued again at start.

Every handler is idempotent (snapshots replace, payloads are set, deletes by filter), so applying
an event twice, or replaying from an older checkpoint, gives the same index. The projection keeps
every tool's row in memory (``SearchTable``, loaded by one scan at start), so no event scans the
index; the checkpoint and the skill points are written by ``flush`` (coalesced, not per event):
a crash in between replays the events after the checkpoint, which is safe because they are
idempotent and skill sums are derived from the rows, not from the events.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from toolmesh.contracts.events import (
    Event,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    ToolsClassified,
    ToolsDiscovered,
)
from toolmesh.embed.lane import EmbeddingLanes
from toolmesh.embed.model import DIMENSIONS, Embedder
from toolmesh.embed.text import dense_text, tool_text
from toolmesh.index.base import IndexState, Point, ToolIndex, Where, skill_point_id, tool_point_id
from toolmesh.lifecycle import ServerStatus
from toolmesh.naming import namespace_tool
from toolmesh.platform.supervision import wait_event
from toolmesh.search.table import Row, SearchTable, Vector
from toolmesh.skills.taxonomy import Skill
from toolmesh.skills.vectors import skill_vectors
from toolmesh_projector.vector_index.filters import embedded_fields, flags

log = logging.getLogger("toolmesh.indexer")
FLUSH_INTERVAL = 1.0  # seconds between checkpoint writes while events keep coming
TOOLS = "tool"
SKILLS = "skill"
_UPSERT_PAGE = 256
VECTOR_STEP = 128  # tools given their vectors per step of the backlog
RETRY_SECONDS = 1.0  # pause after a step of the backlog failed


def _with_current_text(payload: dict[str, Any]) -> dict[str, Any]:
    """A stored row whose dense text an older version derived differently: this version's, to embed anew."""
    text = dense_text(str(payload.get("original_name") or ""), payload.get("description"), payload.get("input_schema"))
    if payload.get("dense_text") == text:
        return payload
    return {**payload, "dense_text": text, **embedded_fields(False)}


async def _first_of(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


class IndexProjection:
    """Applies events to a ``ToolIndex`` and to the in-memory ``SearchTable``, checkpoint beside the index."""

    def __init__(
        self,
        index: ToolIndex,
        embedder: Embedder | None,
        skills: list[Skill],
        *,
        lanes: EmbeddingLanes,
        dimensions: int = DIMENSIONS,
    ) -> None:
        """``lanes``: the process's bulk embedding lanes (its context's), where ``embedder``'s work queues."""
        self.index = index
        self.embedder = embedder
        self.skills = {s.id: s for s in skills}
        self.dimensions = dimensions
        self.placeholder = [1.0] + [0.0] * (dimensions - 1)  # stored when no model is loaded; never queried
        self.table = SearchTable(self.skills, dimensions)
        self.state = IndexState()
        self._lock = asyncio.Lock()
        self._unsaved = False
        self._lane = lanes.for_embedder(embedder) if embedder is not None else None
        self._unembedded: dict[str, None] = {}  # tools waiting for their vector, oldest first
        self._backlog = asyncio.Event()
        self._handlers: dict[type[Event], Callable[[Any], Awaitable[None]]] = {
            ServerRegistered: self._server_registered,
            ServerStatusChanged: self._status_changed,
            ServerRemoved: self._server_removed,
            ToolsDiscovered: self._tools_discovered,
            ToolsClassified: self._tools_classified,
        }

    async def start(self) -> IndexState:
        """Load the checkpoint and every tool row (one scan), and bring skill points in line with the taxonomy."""
        self.state = await self.index.load_state()
        for hit in await self.index.scroll(Where(kind=TOOLS), with_vectors=True):
            payload = _with_current_text(hit.payload)
            embedded = bool(payload.get("embedded")) and hit.vector is not None
            self.table.put(hit.id, payload, np.asarray(hit.vector, dtype=np.float32) if embedded else None)
            if not embedded:
                self._wait_for_vector(hit.id)
        self.table.applied(self.state.last_seq)
        await self.sync_skills()
        await self.flush()
        return self.state

    @property
    def vectors_behind(self) -> int:
        """Indexed tools still waiting for their vector."""
        return len(self._unembedded)

    def _wait_for_vector(self, point_id: str) -> None:
        if self._lane is not None:
            self._unembedded[point_id] = None
            self._backlog.set()

    async def embed_backlog(self, step: int = VECTOR_STEP, stop: asyncio.Event | None = None) -> int:
        """Give up to ``step`` of the oldest tools without a vector theirs; how many got one.

        Nothing is written once ``stop`` is set (the lease may be another replica's by then).
        """
        if self._lane is None or not self._unembedded:
            return 0
        ids = list(itertools.islice(self._unembedded, step))
        rows = [row for i in ids if (row := self.table.get(i)) is not None and row.vector is None]
        texts = [str(row.payload["dense_text"]) for row in rows]
        vectors = await self._lane.embed(texts, first=True)  # dense search needs them; classification can wait
        if stop is not None and stop.is_set():
            return 0
        async with self._lock:
            ready: list[tuple[Row, Vector]] = []
            for row, text, vector in zip(rows, texts, vectors, strict=True):
                current = self.table.get(row.id)  # a newer snapshot may have changed or dropped it meanwhile
                if current is not None and current.vector is None and current.payload.get("dense_text") == text:
                    ready.append((current, vector))
            now_embedded = embedded_fields(True)
            points = [Point(row.id, [float(x) for x in v], {**row.payload, **now_embedded}) for row, v in ready]
            for start in range(0, len(points), _UPSERT_PAGE):
                await self.index.upsert(points[start : start + _UPSERT_PAGE])
            for row, vector in ready:
                self.table.set_vector(row.id, vector, now_embedded)
            for point_id in ids:
                row = self.table.get(point_id)
                if row is None or row.vector is not None:
                    self._unembedded.pop(point_id, None)
        return len(ready)

    async def embed_all(self) -> None:
        """Give every tool waiting for a vector its vector (tests, benchmarks, no background task)."""
        while self._unembedded:
            await self.embed_backlog()

    async def run_embedder(self, stop: asyncio.Event) -> None:
        """Embed the backlog step by step, as tools arrive, until ``stop``.

        A step the model fails on is tried again one tool at a time: a tool that fails alone goes to
        the back of the backlog (still searchable by its words), and the others get their vectors.
        """
        step = VECTOR_STEP
        while not stop.is_set():
            if not self._unembedded:
                self._backlog.clear()
                await _first_of(self._backlog, stop)
                continue
            try:
                await self.embed_backlog(step, stop)
                step = min(VECTOR_STEP, step * 2)
            except Exception:
                log.exception("embedding %d of %d waiting tools failed", step, self.vectors_behind)
                if step == 1 and self._unembedded:
                    oldest = next(iter(self._unembedded))
                    del self._unembedded[oldest]
                    self._unembedded[oldest] = None
                    await wait_event(stop, RETRY_SECONDS)
                step = 1

    async def apply(self, event: Event | None, seq: int) -> bool:
        """Apply the event at ``seq`` (None: a message with nothing to apply); False if already applied."""
        async with self._lock:
            if seq <= self.state.last_seq:
                return False
            handler = self._handlers.get(type(event)) if event is not None else None
            if handler is not None:
                await handler(event)
            self.state.last_seq = seq
            self.table.applied(seq)
            self._unsaved = True
            return handler is not None

    async def flush(self) -> None:
        """Write the changed skill points and the checkpoint (what ``apply`` left for later)."""
        async with self._lock:
            changed = sorted(self.table.skills.changed)
            self.table.skills.changed.clear()
            points = []
            for skill in changed:
                vector = self.table.skills.vector(skill)
                if vector is not None:
                    payload = {"kind": SKILLS, **self.table.skills.payload(skill)}
                    points.append(Point(skill_point_id(skill), [float(x) for x in vector], payload))
            await self.index.upsert(points)
            if self._unsaved or points:
                await self.index.save_state(self.state)
                self._unsaved = False

    async def run_flusher(self, stop: asyncio.Event, interval: float = FLUSH_INTERVAL) -> None:
        """Flush every ``interval`` seconds until ``stop``, then once more."""
        try:
            while not stop.is_set():
                if not await wait_event(stop, interval):
                    await self.flush()
        finally:
            await self.flush()

    async def _server_registered(self, event: ServerRegistered) -> None:
        if event.server_id not in self.state.servers:
            self.state.servers[event.server_id] = {"name": event.name, "status": str(ServerStatus.DISCONNECTED)}

    async def _status_changed(self, event: ServerStatusChanged) -> None:
        server = self.state.servers.get(event.server_id)
        if server is None:
            return
        server["status"] = str(event.status)
        await self.index.set_payload_where(
            Where(kind=TOOLS, server_id=event.server_id), {"server_status": str(event.status)}
        )
        for row in self.table.of_server(event.server_id):
            self.table.update(row.id, {"server_status": str(event.status)})

    async def _server_removed(self, event: ServerRemoved) -> None:
        await self.index.delete_where(Where(kind=TOOLS, server_id=event.server_id))
        for row in self.table.of_server(event.server_id):
            self._forget(row.id)
        self.state.servers.pop(event.server_id, None)

    async def _tools_discovered(self, event: ToolsDiscovered) -> None:
        server = self.state.servers.get(event.server_id)
        if server is None:
            return  # like the Postgres projection: tools of an unknown (removed) server are dropped
        existing = {row.id: row for row in self.table.of_server(event.server_id)}
        namespace = event.namespace
        wanted: dict[str, dict[str, Any]] = {}
        for tool in event.tools:
            point_id = tool_point_id(event.server_id, tool.original_name)
            wanted[point_id] = {
                "kind": TOOLS,
                "name": namespace_tool(event.server_name, tool.original_name),
                "original_name": tool.original_name,
                "description": tool.description,
                "input_schema": tool.input_schema,
                "text": tool_text(event.server_name, tool.original_name, tool.description, tool.input_schema),
                "dense_text": dense_text(tool.original_name, tool.description, tool.input_schema),
                "source_server_id": event.server_id,
                "source_server_name": event.server_name,
                "is_external": True,
                "server_status": server["status"],
                "namespace": namespace,
                "category": str(tool.category),
            }
        rows: list[tuple[str, dict[str, Any], Vector | None]] = []
        for point_id, payload in wanted.items():
            old = existing.get(point_id)
            same = old is not None and all(old.payload.get(key) == payload[key] for key in ("text", "dense_text"))
            if old is not None and same:
                merged = {**old.payload, **payload}  # same text: keep the vector and the classification
                if merged != old.payload:
                    rows.append((point_id, merged, old.vector))
                vector = old.vector
            else:  # searchable by its words now, by its vector once the lane has embedded it
                fresh = {**payload, "is_classified": False, "skill_ids": [], "primary_skill_id": None}
                fresh.update({**flags(is_external=True, is_classified=False, embedded=False), **embedded_fields(False)})
                rows.append((point_id, fresh, None))
                vector = None
            if vector is None:
                self._wait_for_vector(point_id)
        await self._write(rows)
        gone = [point_id for point_id in existing if point_id not in wanted]
        await self.index.delete(gone)
        for point_id in gone:
            self._forget(point_id)

    def _forget(self, point_id: str) -> None:
        self.table.remove(point_id)
        self._unembedded.pop(point_id, None)

    async def _write(self, rows: list[tuple[str, dict[str, Any], Vector | None]]) -> None:
        """Upsert points to the index, then to the table (the table never shows what the index lacks)."""
        points = [
            Point(i, [float(x) for x in v] if v is not None else self.placeholder, payload) for i, payload, v in rows
        ]
        for start in range(0, len(points), _UPSERT_PAGE):
            await self.index.upsert(points[start : start + _UPSERT_PAGE])
        for point_id, payload, vector in rows:
            self.table.put(point_id, payload, vector)

    async def _tools_classified(self, event: ToolsClassified) -> None:
        if event.server_id not in self.state.servers:
            return
        rows: list[tuple[str, dict[str, Any], Vector | None]] = []
        for tool in event.tools:
            row = self.table.get(tool_point_id(event.server_id, tool.original_name))
            if row is None:
                continue  # a newer snapshot dropped the tool
            changes = {
                "is_classified": True,
                "classified_flag": "true",
                "skill_ids": [s.skill_id for s in tool.skills],
                "primary_skill_id": tool.primary_skill_id,
                "skill_confidences": {s.skill_id: s.confidence for s in tool.skills},
            }
            rows.append((row.id, {**row.payload, **changes}, row.vector))
        await self._write(rows)  # one upsert for the batch

    async def sync_skills(self) -> None:
        """Drop skill points no longer in the taxonomy; embed the skills' descriptions (vectors follow on flush)."""
        stale = [
            hit.id
            for hit in await self.index.scroll(Where(kind=SKILLS))
            if hit.payload.get("skill_id") not in self.skills
        ]
        await self.index.delete(stale)
        if self._lane is None or self.embedder is None:
            return
        vectors = await self._lane.run(skill_vectors, self.embedder, list(self.skills.values()), first=True)
        self.table.skills.descriptions = {
            s: np.asarray(v, dtype=np.float32) for s, v in zip(self.skills, vectors, strict=True)
        }
        self.table.skills.changed.update(self.skills)
