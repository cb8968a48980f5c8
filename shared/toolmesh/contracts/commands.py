"""Commands: asks for something to happen, kept in the work-queue stream ``TOOLMESH_COMMANDS``."""

from __future__ import annotations

import uuid
from typing import ClassVar

from pydantic import BaseModel, Field

from toolmesh.contracts.events import DiscoveredTool

COMMANDS_STREAM = "TOOLMESH_COMMANDS"
COMMANDS_SUBJECTS = "toolmesh.cmd.>"
RECONNECT_REASON = "reconnect"
"""``ConnectServer.reason`` of a health-driven reconnect: the EC-001 backoff applies."""


class Command(BaseModel):
    """Common envelope: an id doubles as the idempotency key (JetStream ``Nats-Msg-Id``)."""

    subject: ClassVar[str]
    command_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    schema_version: int = 1


class ConnectServer(Command):
    """Open (or re-open) the session of a server; idempotent (BR-002)."""

    subject: ClassVar[str] = "toolmesh.cmd.server.connect"
    server_id: str
    reason: str = "connect"


class ClassifyTools(Command):
    """Classify these tools of a server again (after they ended UNCLASSIFIED); any classifier-worker."""

    subject: ClassVar[str] = "toolmesh.cmd.tools.classify"
    server_id: str
    server_name: str
    namespace: str
    tools: list[DiscoveredTool]


class CheckServerHealth(Command):
    """Check one server once in health window ``window`` (BR-006); any health-worker may take it.

    The scheduler publishes one per server per interval with ``Nats-Msg-Id`` =
    ``health:<server_id>:<window>``, so a second scheduler during a handover adds nothing.
    A check taken after ``deadline`` (epoch seconds) is stale and dropped.
    """

    subject: ClassVar[str] = "toolmesh.cmd.health.check"
    server_id: str
    window: int
    deadline: float
