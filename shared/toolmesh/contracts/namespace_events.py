"""Events about a namespace rather than one server: its API keys, its endpoints (bundles), and the
tool calls made in it (the audit log). The envelope is ``events.Event``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from toolmesh.contracts.events import Event


class KeyCreated(Event):
    """An API key was created (its token is never part of any event)."""

    subject: ClassVar[str] = "toolmesh.evt.key.created"
    key_id: str
    name: str
    role: str
    ip_address: str | None = None


class KeyRevoked(Event):
    """An API key was revoked: every gateway refuses it from this event on."""

    subject: ClassVar[str] = "toolmesh.evt.key.revoked"
    key_id: str
    name: str
    role: str
    ip_address: str | None = None


class AppConnected(Event):
    """A person allowed an MCP client (a "connected app") to act as their key at one MCP endpoint."""

    subject: ClassVar[str] = "toolmesh.evt.app.connected"
    grant_id: str
    key_id: str
    client_id: str
    client_name: str | None = None
    resource: str


class AppDisconnected(Event):
    """A connected app's tokens were revoked: every gateway refuses them from this event on."""

    subject: ClassVar[str] = "toolmesh.evt.app.disconnected"
    grant_id: str
    key_id: str
    client_id: str
    client_name: str | None = None
    reason: str
    ip_address: str | None = None


class CallRecord(BaseModel):
    """One tool call as the audit log keeps it: who, what, where, how it ended, how long (no arguments)."""

    server_id: str
    server_name: str
    tool: str
    actor: str | None = None
    ip_address: str | None = None
    outcome: Literal["ok", "tool_error", "failed"]
    error_code: str | None = None
    duration_ms: float
    at: datetime
    policy: str | None = None
    """The policy that denied, held or redacted the call, or would have (a dry run)."""
    policy_effect: str | None = None
    """``deny``, ``require_approval``, ``redact``, or ``dry_run:`` and the effect it would have had."""
    result_findings: list[str] = Field(default_factory=list)
    """What the poisoning scanner found in the result (one line each; the result was passed on as it was)."""
    result_scanned: bool | None = None
    """Whether the result was scanned: None when there was no result to scan or scanning is off, False when
    the scanner was too far behind to read it."""


class CallsRecorded(Event):
    """Tool calls of one namespace made through one gateway, recorded in batches off the hot path."""

    subject: ClassVar[str] = "toolmesh.evt.audit.calls"
    calls: list[CallRecord]


class EndpointSaved(Event):
    """An endpoint (bundle) was created or replaced: its whole definition."""

    subject: ClassVar[str] = "toolmesh.evt.endpoint.saved"
    endpoint_id: str
    name: str
    description: str | None = None
    include: list[str]
    exclude: list[str] = Field(default_factory=list)
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)
    ip_address: str | None = None


class EndpointDeleted(Event):
    """An endpoint (bundle) was deleted."""

    subject: ClassVar[str] = "toolmesh.evt.endpoint.deleted"
    endpoint_id: str
    name: str
    ip_address: str | None = None
