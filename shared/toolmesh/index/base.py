"""The index interface: points with a vector and a payload, a neutral filter, and a checkpoint.

Payload fields of a tool point (system contract, plus what search needs): ``kind`` ("tool"),
``name``, ``original_name``, ``description``, ``input_schema``, ``text`` (the tool as one text),
``dense_text`` (what the vector embeds), ``source_server_id``, ``source_server_name``,
``is_external``, ``is_classified``, ``skill_ids``, ``primary_skill_id``, ``server_status``,
``namespace``, ``embedded`` (False when stored without a real vector).
A skill point has ``kind`` "skill", ``skill_id``, ``name``, ``description``, ``tool_count``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

COLLECTION = "mcp_unified_search"
_POINT_NAMESPACE = uuid.UUID("5b0e4c52-3f7a-4f0e-9a51-5d1f0c7e2a10")


def tool_point_id(server_id: str, original_name: str) -> str:
    """Stable point id of one tool of one server."""
    return str(uuid.uuid5(_POINT_NAMESPACE, f"tool:{server_id}:{original_name}"))


def skill_point_id(skill_id: str) -> str:
    """Stable point id of one skill."""
    return str(uuid.uuid5(_POINT_NAMESPACE, f"skill:{skill_id}"))


@dataclass
class Point:
    """A vector and its payload."""

    id: str
    vector: list[float]
    payload: dict[str, Any]


@dataclass
class Hit:
    """A stored point as a query or scroll returns it (``score`` is 0 for scrolls)."""

    id: str
    payload: dict[str, Any]
    score: float = 0.0
    vector: list[float] | None = None


@dataclass(frozen=True)
class Where:
    """A backend-neutral filter: every set field must hold (lists match any of their values)."""

    kind: str | None = None
    server_id: str | None = None
    server_names: Sequence[str] | None = None
    statuses: Sequence[str] | None = None
    external_only_false: bool = False  # True: internal tools only (include_external=false)
    namespace: str | None = None
    categories: Sequence[str] | None = None  # any of these tool categories
    skill_ids: Sequence[str] | None = None
    or_unclassified: bool = False  # with skill_ids: unclassified tools match too
    embedded_only: bool = False


@dataclass
class IndexState:
    """The indexer's checkpoint, stored beside the index so both move together."""

    last_seq: int = 0
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> {"name", "status"}


class ToolIndex(Protocol):
    """What the indexer writes and search reads; implementations translate their driver's errors."""

    backend: str

    async def upsert(self, points: list[Point]) -> None: ...

    async def delete(self, ids: list[str]) -> None: ...

    async def delete_where(self, where: Where) -> None: ...

    async def set_payload(self, ids: list[str], payload: dict[str, Any]) -> None: ...

    async def set_payload_where(self, where: Where, payload: dict[str, Any]) -> None: ...

    async def query(self, vector: list[float], where: Where, limit: int, *, with_payload: bool = True) -> list[Hit]: ...

    async def scroll(self, where: Where, *, with_vectors: bool = False) -> list[Hit]: ...

    async def retrieve(self, ids: list[str], *, with_vectors: bool = False) -> list[Hit]: ...

    async def load_state(self) -> IndexState: ...

    async def save_state(self, state: IndexState) -> None: ...

    async def reset(self) -> None: ...

    async def close(self) -> None: ...
