"""Events: facts in the JetStream stream ``TOOLMESH_EVENTS``, public on ``toolmesh.evt.>``.

Every event carries ``event_id``, ``occurred_at``, ``server_id`` and ``schema_version``; its
subject is declared once, next to the model.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from toolmesh.contracts.servers import TransportType
from toolmesh.lifecycle import ServerStatus

EVENTS_STREAM = "TOOLMESH_EVENTS"
EVENTS_SUBJECTS = "toolmesh.evt.>"


def _now() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return str(uuid.uuid4())


class Event(BaseModel):
    """Common envelope of every event."""

    subject: ClassVar[str]
    event_id: str = Field(default_factory=_new_id)
    occurred_at: datetime = Field(default_factory=_now)
    server_id: str
    schema_version: int = 1
    actor: str | None = None


class ServerRegistered(Event):
    """A server was registered; its connection config travels sealed, never in clear."""

    subject: ClassVar[str] = "toolmesh.evt.server.registered"
    name: str
    description: str | None = None
    transport_type: TransportType
    sealed_config: str
    masked_config: dict[str, Any]
    health_check_url: str | None = None
    ip_address: str | None = None


class ServerStatusChanged(Event):
    """A server moved in the state machine (or reconnected: ``history`` says ``RECONNECT``)."""

    subject: ClassVar[str] = "toolmesh.evt.server.status_changed"
    status: ServerStatus
    previous_status: ServerStatus | None = None
    error_message: str | None = None
    history: str
    details: dict[str, Any] = Field(default_factory=dict)


class ServerRemoved(Event):
    """A server was removed with its tools, index entries and history."""

    subject: ClassVar[str] = "toolmesh.evt.server.removed"
    name: str


class DiscoveredTool(BaseModel):
    """One upstream tool as ``tools/list`` gave it."""

    original_name: str
    description: str | None = None
    input_schema: dict[str, Any] = Field(default_factory=dict)


class ToolsDiscovered(Event):
    """The full tool list of one server at one moment (a snapshot: it replaces the previous one)."""

    subject: ClassVar[str] = "toolmesh.evt.tools.discovered"
    server_name: str
    tools: list[DiscoveredTool]


class SkillAssignment(BaseModel):
    """One skill given to a tool, with the classifier's confidence (only >= 0.5 are kept, BR-004)."""

    skill_id: str
    confidence: float = Field(ge=0.0, le=1.0)


class ToolClassification(BaseModel):
    """The 1-3 skills of one tool, best first, and its primary skill."""

    original_name: str
    skills: list[SkillAssignment] = Field(default_factory=list, max_length=3)
    primary_skill_id: str | None = None


class ToolsClassified(Event):
    """Skills assigned to some tools of one server (a batch of at most 10, BR-004/EC-006)."""

    subject: ClassVar[str] = "toolmesh.evt.tools.classified"
    server_name: str
    classifier: str
    tools: list[ToolClassification]


class HealthChecked(Event):
    """The outcome of one health check of one server (BR-006)."""

    subject: ClassVar[str] = "toolmesh.evt.health.checked"
    healthy: bool
    counted: bool = True
    response_time_ms: float | None = None
    consecutive_failures: int = 0
    error: str | None = None
    method: str | None = None  # "http" (health_check_url) or "ping" (MCP ping through the owner)
    window: int | None = None  # the health interval this check belongs to
    checked_by: str | None = None  # the health-worker that ran it


EVENT_TYPES: dict[str, type[Event]] = {
    cls.subject: cls
    for cls in (ServerRegistered, ServerStatusChanged, ServerRemoved, ToolsDiscovered, ToolsClassified, HealthChecked)
}


def decode_event(subject: str, data: bytes) -> Event | None:
    """The event model for a stream message, or ``None`` for a subject this version does not know."""
    cls = EVENT_TYPES.get(subject)
    return cls.model_validate_json(data) if cls else None
