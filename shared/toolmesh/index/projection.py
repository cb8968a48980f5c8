"""The index as a projection of events: tools indexed on discovery, payloads moved by status and
classification, points removed with their server, skill vectors recomputed when their tools change.

Every handler is idempotent (snapshots replace, payloads are set, deletes by filter), so applying
an event twice, or replaying from an older checkpoint, gives the same index.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
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
from toolmesh.embed.model import DIMENSIONS, Embedder
from toolmesh.embed.text import dense_text, tool_text
from toolmesh.index.base import IndexState, Point, ToolIndex, Where, skill_point_id, tool_point_id
from toolmesh.index.filters import flags
from toolmesh.lifecycle import ServerStatus
from toolmesh.naming import namespace_tool
from toolmesh.skills.taxonomy import Skill, skill_text

log = logging.getLogger("toolmesh.indexer")
DEFAULT_NAMESPACE = "default"
_PLACEHOLDER = [1.0] + [0.0] * (DIMENSIONS - 1)  # stored when no model is loaded; never queried
TOOLS = "tool"
SKILLS = "skill"


def skill_vector(description: np.ndarray, tools: Iterable[list[float]]) -> list[float]:
    """BR-008: the normalised mean of the description's and the skill's tools' embeddings."""
    rows = [description, *(np.asarray(v, dtype=np.float32) for v in tools)]
    mean = np.mean(rows, axis=0)
    norm = float(np.linalg.norm(mean))
    return [float(x) for x in (mean / norm if norm > 0 else description)]


class IndexProjection:
    """Applies events to a ``ToolIndex``, keeping the checkpoint beside it."""

    def __init__(self, index: ToolIndex, embedder: Embedder | None, skills: list[Skill]) -> None:
        self.index = index
        self.embedder = embedder
        self.skills = {s.id: s for s in skills}
        self.state = IndexState()
        self._skill_descriptions: dict[str, np.ndarray] = {}
        self._handlers: dict[type[Event], Callable[[Any], Awaitable[None]]] = {
            ServerRegistered: self._server_registered,
            ServerStatusChanged: self._status_changed,
            ServerRemoved: self._server_removed,
            ToolsDiscovered: self._tools_discovered,
            ToolsClassified: self._tools_classified,
        }

    async def start(self) -> IndexState:
        """Load the checkpoint and bring skill points in line with the taxonomy."""
        self.state = await self.index.load_state()
        await self.sync_skills()
        return self.state

    async def _embed(self, texts: list[str]) -> np.ndarray | None:
        if self.embedder is None or not texts:
            return None
        return await asyncio.to_thread(self.embedder.embed, texts)

    async def apply(self, event: Event | None, seq: int) -> bool:
        """Apply the event at ``seq`` (None: a message with nothing to apply); False if already applied."""
        if seq <= self.state.last_seq:
            return False
        handler = self._handlers.get(type(event)) if event is not None else None
        if handler is not None:
            await handler(event)
        self.state.last_seq = seq
        await self.index.save_state(self.state)
        return handler is not None

    def _changed(self) -> None:
        self.state.revision += 1

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
        self._changed()

    async def _server_removed(self, event: ServerRemoved) -> None:
        existing = await self.index.scroll(Where(kind=TOOLS, server_id=event.server_id))
        affected = {s for hit in existing for s in hit.payload.get("skill_ids", [])}
        await self.index.delete_where(Where(kind=TOOLS, server_id=event.server_id))
        self.state.servers.pop(event.server_id, None)
        await self.recompute_skills(affected)
        self._changed()

    async def _tools_discovered(self, event: ToolsDiscovered) -> None:
        server = self.state.servers.get(event.server_id)
        if server is None:
            return  # like the Postgres projection: tools of an unknown (removed) server are dropped
        existing = {
            hit.id: hit
            for hit in await self.index.scroll(Where(kind=TOOLS, server_id=event.server_id), with_vectors=True)
        }
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
                "dense_text": dense_text(tool.original_name, tool.description),
                "source_server_id": event.server_id,
                "source_server_name": event.server_name,
                "is_external": True,
                "server_status": server["status"],
                "namespace": DEFAULT_NAMESPACE,
            }
        affected: set[str] = set()
        points: list[Point] = []
        fresh: list[str] = []
        embedded = self.embedder is not None
        for point_id, payload in wanted.items():
            old = existing.get(point_id)
            same = (
                old is not None
                and old.vector is not None
                and all(old.payload.get(key) == payload[key] for key in ("text", "dense_text"))
            )
            if old is not None and same and old.payload.get("embedded") == embedded:
                # Same text: keep the vector and the classification.
                points.append(Point(point_id, old.vector or _PLACEHOLDER, {**old.payload, **payload}))
            else:
                fresh.append(point_id)
                if old is not None:
                    affected.update(old.payload.get("skill_ids", []))
        vectors = await self._embed([wanted[i]["dense_text"] for i in fresh])
        for row, point_id in enumerate(fresh):
            payload = {**wanted[point_id], "is_classified": False, "skill_ids": [], "primary_skill_id": None}
            payload["embedded"] = vectors is not None
            payload.update(flags(is_external=True, is_classified=False, embedded=vectors is not None))
            vector = [float(x) for x in vectors[row]] if vectors is not None else _PLACEHOLDER
            points.append(Point(point_id, vector, payload))
        for start in range(0, len(points), 256):
            await self.index.upsert(points[start : start + 256])
        gone = [point_id for point_id in existing if point_id not in wanted]
        affected.update(s for point_id in gone for s in existing[point_id].payload.get("skill_ids", []))
        await self.index.delete(gone)
        await self.recompute_skills(affected)
        self._changed()

    async def _tools_classified(self, event: ToolsClassified) -> None:
        if event.server_id not in self.state.servers:
            return
        ids = {tool_point_id(event.server_id, t.original_name): t for t in event.tools}
        present = {hit.id: hit.payload for hit in await self.index.retrieve(list(ids))}
        affected: set[str] = set()
        for point_id, tool in ids.items():
            if point_id not in present:
                continue  # a newer snapshot dropped the tool
            skills = [s.skill_id for s in tool.skills]
            affected.update(present[point_id].get("skill_ids", []))
            affected.update(skills)
            await self.index.set_payload(
                [point_id],
                {
                    "is_classified": True,
                    "classified_flag": "true",
                    "skill_ids": skills,
                    "primary_skill_id": tool.primary_skill_id,
                    "skill_confidences": {s.skill_id: s.confidence for s in tool.skills},
                },
            )
        await self.recompute_skills(affected)
        self._changed()

    async def sync_skills(self) -> None:
        """Upsert a point per taxonomy skill and drop skills no longer in the taxonomy."""
        stale = [
            hit.id
            for hit in await self.index.scroll(Where(kind=SKILLS))
            if hit.payload.get("skill_id") not in self.skills
        ]
        await self.index.delete(stale)
        vectors = await self._embed([skill_text(s) for s in self.skills.values()])
        if vectors is None:
            return
        self._skill_descriptions = dict(zip(self.skills, vectors, strict=True))
        await self.recompute_skills(self.skills)
        self._changed()

    async def recompute_skills(self, skill_ids: Iterable[str]) -> None:
        """Refresh the vectors of these skills from their description and their tools (BR-004/BR-008)."""
        points = []
        for skill_id in sorted(set(skill_ids)):
            skill, description = self.skills.get(skill_id), self._skill_descriptions.get(skill_id)
            if skill is None or description is None:
                continue
            tools = await self.index.scroll(
                Where(kind=TOOLS, skill_ids=[skill_id], embedded_only=True), with_vectors=True
            )
            vector = skill_vector(description, [t.vector for t in tools if t.vector is not None])
            payload = {
                "kind": SKILLS,
                "skill_id": skill.id,
                "name": skill.name,
                "description": skill.description,
                "tool_count": len(tools),
                "namespace": DEFAULT_NAMESPACE,
            }
            points.append(Point(skill_point_id(skill_id), vector, payload))
        await self.index.upsert(points)
