"""Events: facts in the JetStream stream ``TOOLMESH_EVENTS``, public on ``toolmesh.evt.>``.

Every event carries ``event_id``, ``occurred_at``, ``schema_version``, ``namespace`` and the
``actor`` that caused it; events about a server (``ServerEvent``) also carry its ``server_id``.
Its subject is declared once, next to the model. Events about a namespace rather than a server
(keys, endpoints, audited calls) are in ``namespace_events``; ``event_types`` decodes any of them.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from toolmesh.categories import ToolCategory, categorize
from toolmesh.contracts.connection_config import TransportType
from toolmesh.contracts.servers import NewToolsPolicy
from toolmesh.lifecycle import ServerStatus
from toolmesh.naming import DEFAULT_NAMESPACE
from toolmesh.tool_definitions import PRESENTATION, refusal

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
    server_id: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    schema_version: int = 1
    actor: str | None = None


class ServerEvent(Event):
    """An event about one registered server."""

    server_id: str


class ServerRegistered(ServerEvent):
    """A server was registered; its connection config travels sealed, never in clear."""

    subject: ClassVar[str] = "toolmesh.evt.server.registered"
    name: str
    description: str | None = None
    transport_type: TransportType
    sealed_config: str
    masked_config: dict[str, Any]
    health_check_url: str | None = None
    ip_address: str | None = None
    new_tools: NewToolsPolicy = NewToolsPolicy.AUTO
    private_network: bool | None = None
    """An owner or admin registered it: its URLs may reach loopback and private addresses (``toolmesh.egress.policy``).
    None in events written before the egress policy: the projection decides by who registered the server."""


class ServerStatusChanged(ServerEvent):
    """A server moved in the state machine (or reconnected: ``history`` says ``RECONNECT``)."""

    subject: ClassVar[str] = "toolmesh.evt.server.status_changed"
    status: ServerStatus
    previous_status: ServerStatus | None = None
    error_message: str | None = None
    history: str
    details: dict[str, Any] = Field(default_factory=dict)
    retry_at: datetime | None = None
    """On ERROR: when a session-worker tries to connect again by itself (BR-002: network failures);
    None when nobody will without being asked (credentials refused, a person disconnected)."""


class ServerAuthorized(ServerEvent):
    """An owner or admin authorized toolmesh at a server's OAuth authorization server (issue 25):
    its tokens are stored sealed, never in an event. The gateway then connects the server if it was
    waiting for this."""

    subject: ClassVar[str] = "toolmesh.evt.server.authorized"
    issuer: str
    identity: str = "shared"
    scope: str | None = None


class ServerRemoved(ServerEvent):
    """A server was removed with its tools, index entries and history."""

    subject: ClassVar[str] = "toolmesh.evt.server.removed"
    name: str


class DiscoveredTool(BaseModel):
    """One upstream tool as ``tools/list`` (or a REST server's ``GET /tools``) gave it.

    ``category`` defaults to the one ``categorize`` infers from the name and description, so
    events written before categories existed decode with the category they would get today.
    """

    original_name: str
    description: str | None = None
    input_schema: dict[str, Any] = Field(default_factory=dict)
    category: ToolCategory = ToolCategory.GENERAL
    title: str | None = None
    annotations: dict[str, Any] | None = None  # as the wire spells them: readOnlyHint, destructiveHint, ...
    output_schema: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    task_support: Literal["optional", "required"] | None = None
    """Its ``execution.taskSupport`` (None: forbidden or unsaid): whether a call may run as a task. Not
    pinned: it changes how toolmesh runs the call, not what the tool does or tells the model."""

    @model_validator(mode="before")
    @classmethod
    def _infer_category(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("category") is None and isinstance(data.get("original_name"), str):
            description = data.get("description")
            inferred = categorize(data["original_name"], description if isinstance(description, str) else None)
            return {**data, "category": inferred}
        return data


class ToolsDiscovered(ServerEvent):
    """The full tool list of one server at one moment (a snapshot: it replaces the previous one).

    ``left_out`` counts the tools the upstream listed that toolmesh refused (``toolmesh.tool_definitions``);
    a definition outside the contract's bounds that still reaches it (an event written before them) is
    dropped and counted here, so no reader ever has to skip the event.
    """

    subject: ClassVar[str] = "toolmesh.evt.tools.discovered"
    server_name: str
    tools: list[DiscoveredTool]
    left_out: int = 0

    @model_validator(mode="before")
    @classmethod
    def _drop_refused(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("tools"), list):
            return data
        kept = [
            t
            for t in data["tools"]
            if not isinstance(t, dict)
            or refusal(
                t.get("original_name"),
                t.get("description"),
                _mapping(t.get("input_schema")),
                presentation={k: t.get(k) for k in PRESENTATION},
            )
            is None
        ]
        if len(kept) == len(data["tools"]):
            return data
        dropped = len(data["tools"]) - len(kept)
        return {**data, "tools": kept, "left_out": int(data.get("left_out") or 0) + dropped}


def _mapping(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


class ServerConnected(ServerEvent):
    """Domain event: a session to the server opened and its tools were listed; the server serves now.

    Published at every transition into CONNECTED from a state without a session (a first connect
    or a reconnect), never for DEGRADED -> CONNECTED (the session stayed up)."""

    subject: ClassVar[str] = "toolmesh.evt.server.connected"
    server_name: str
    transport_type: TransportType
    agent: str | None = None  # the principal that registered the server
    tool_count: int
    reconnect: bool = False


class ServerDisconnected(ServerEvent):
    """Domain event: the session of a serving server ended.

    ``was_graceful`` is True when someone asked for it (disconnect, removal) and False when an
    error ended it (session lost, failed health checks): an error is not a graceful disconnect."""

    subject: ClassVar[str] = "toolmesh.evt.server.disconnected"
    server_name: str
    was_graceful: bool
    reason: str | None = None


class ToolDiscovered(ServerEvent):
    """Domain event: one tool the server did not list before (one event per new tool; the full
    list stays in ``tools.discovered``)."""

    subject: ClassVar[str] = "toolmesh.evt.tool.discovered"
    server_name: str
    name: str  # namespaced: server.tool
    original_name: str
    description: str | None = None
    category: ToolCategory


class DiscoveredResource(BaseModel):
    """One upstream resource as ``resources/list`` gave it: its URI and its full wire form."""

    uri: str
    item: dict[str, Any]


class DiscoveredResourceTemplate(BaseModel):
    """One upstream resource template as ``resources/templates/list`` gave it."""

    uri_template: str
    item: dict[str, Any]


class DiscoveredPrompt(BaseModel):
    """One upstream prompt as ``prompts/list`` gave it: its original name and its full wire form."""

    original_name: str
    item: dict[str, Any]


class ResourcesDiscovered(ServerEvent):
    """The full resource and resource-template lists of one server (a snapshot, like ``tools.discovered``)."""

    subject: ClassVar[str] = "toolmesh.evt.resources.discovered"
    server_name: str
    resources: list[DiscoveredResource]
    templates: list[DiscoveredResourceTemplate] = Field(default_factory=list)


class PromptsDiscovered(ServerEvent):
    """The full prompt list of one server (a snapshot)."""

    subject: ClassVar[str] = "toolmesh.evt.prompts.discovered"
    server_name: str
    prompts: list[DiscoveredPrompt]


class ServerDescribed(ServerEvent):
    """What an upstream said about itself when its session opened: needed to serve it unchanged."""

    subject: ClassVar[str] = "toolmesh.evt.server.described"
    protocol_version: str
    capabilities: dict[str, Any] = Field(default_factory=dict)
    server_info: dict[str, Any] = Field(default_factory=dict)
    instructions: str | None = None
    modern_versions: list[str] = Field(default_factory=list)
    """The 2026-07-28-era versions it named in ``server/discover`` besides the handshake (empty: it
    speaks the handshake era only)."""
    modern_only: dict[str, list[str]] = Field(default_factory=dict)
    """What it lists in that era only, by list (``tools``, ``prompts``, ``resources``,
    ``resource_templates``): a client of that era reaches these in it, everything else through the
    handshake session."""
    modern_tasks: bool = False
    """Whether it declared the Tasks extension (``io.modelcontextprotocol/tasks``) in ``server/discover``:
    a ``tools/call`` of a client of that era that declares it too goes to the upstream in that era, and
    the upstream's own tasks are passed through."""


class SkillAssignment(BaseModel):
    """One skill given to a tool, with the classifier's confidence (only >= 0.5 are kept, BR-004)."""

    skill_id: str
    confidence: float = Field(ge=0.0, le=1.0)


class ToolClassification(BaseModel):
    """The 1-3 skills of one tool, best first, and its primary skill."""

    original_name: str
    skills: list[SkillAssignment] = Field(default_factory=list, max_length=3)
    primary_skill_id: str | None = None


class ToolsClassified(ServerEvent):
    """Skills assigned to some tools of one server (a batch of at most 10, BR-004/EC-006)."""

    subject: ClassVar[str] = "toolmesh.evt.tools.classified"
    server_name: str
    classifier: str
    tools: list[ToolClassification]


class ToolsUnclassified(ServerEvent):
    """Classification of these tools failed ``attempts`` times and stopped: they are UNCLASSIFIED
    (still searchable) until someone retries (``POST .../tools/classify``)."""

    subject: ClassVar[str] = "toolmesh.evt.tools.unclassified"
    server_name: str
    tools: list[str]
    error: str
    attempts: int


class HealthChecked(ServerEvent):
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


class ServerConfigResealed(ServerEvent):
    """A server's connection config sealed again under the current credential key (key rotation)."""

    subject: ClassVar[str] = "toolmesh.evt.server.config_resealed"
    sealed_config: str
    key_id: str


class ToolChange(BaseModel):
    """One tool held back: its definition changed after it was approved, it is new under ``review``, or
    the poisoning scanner flagged a definition no admin approved."""

    original_name: str
    reason: Literal["changed", "new", "flagged"]
    fields: list[str] = Field(default_factory=list)  # parts of toolmesh.pinning.PARTS, or the scanner's findings
    approved_hash: str | None = None
    definition_hash: str
    description: str | None = None


class ToolsChanged(ServerEvent):
    """The owner of a session saw tool definitions that wait for an admin's approval (rug-pull defence)."""

    subject: ClassVar[str] = "toolmesh.evt.tools.changed"
    server_name: str
    changes: list[ToolChange]


class ApprovedTool(BaseModel):
    """A tool definition an admin approved, by its hash."""

    original_name: str
    definition_hash: str


class ToolsApproved(ServerEvent):
    """An admin approved held tool definitions: they are listed and callable again."""

    subject: ClassVar[str] = "toolmesh.evt.tools.approved"
    server_name: str
    tools: list[ApprovedTool]


class PromptsApproved(ServerEvent):
    """An admin approved held prompt definitions (``original_name`` names a prompt): listed and served again."""

    subject: ClassVar[str] = "toolmesh.evt.prompts.approved"
    server_name: str
    prompts: list[ApprovedTool]


class TemplatesApproved(ServerEvent):
    """An admin approved resource templates the poisoning scanner flags (``original_name`` is the URI
    template, ``definition_hash`` its ``template_definition_hash``): listed and used to route reads."""

    subject: ClassVar[str] = "toolmesh.evt.templates.approved"
    server_name: str
    templates: list[ApprovedTool]


class InstructionsApproved(ServerEvent):
    """An admin approved a server's current instructions (by their hash): they are served from now on."""

    subject: ClassVar[str] = "toolmesh.evt.instructions.approved"
    server_name: str
    definition_hash: str
