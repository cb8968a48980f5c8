"""REST bodies of the server endpoints (system contract, "Server Management")."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from toolmesh.categories import ToolCategory
from toolmesh.contracts.connection_config import (
    CONFIG_FIELDS,
    TransportType,
    config_problems,
    insecure_url_problem,
)
from toolmesh.credentials import mask_config
from toolmesh.egress.policy import url_problem
from toolmesh.lifecycle import ServerStatus
from toolmesh.naming import NAMESPACE_PATTERN, SERVER_NAME_PATTERN, unreserved
from toolmesh.redaction import MASK
from toolmesh.secret_text import mask_url
from toolmesh.storable import has_nul


def _shown_url(url: str | None) -> str | None:
    return mask_url(url) if url else url


ShownUrl = Annotated[str | None, PlainSerializer(_shown_url, return_type=str | None)]
"""A URL in a response: its user-info and query are ``***`` whoever asks (it may carry credentials)."""


class NewToolsPolicy(StrEnum):
    """What happens to a tool that appears on a server after its first tool list."""

    AUTO = "auto"  # listed and callable at once
    REVIEW = "review"  # held until an admin approves it


def _shown_field(transport: TransportType, config: dict[str, Any], field: str) -> Any:
    """``config[field]`` as an error may echo it (in the 422 body): as ``GET /servers/{id}`` shows it,
    and only ``***`` for headers and env (a bad name may hold a value) and for a field of no known kind."""
    required, optional = CONFIG_FIELDS[transport]
    if field in ("headers", "env", "credentials", "spec") or field not in (required, *optional):
        return MASK
    return mask_config({field: config.get(field)})[field]


def _without_nul(value: str | None) -> str | None:
    if value is not None and has_nul(value):
        raise ValueError("may not contain the NUL character")
    return value


class RegisterServerRequest(BaseModel):
    """``POST /api/v1/aggregator/servers``."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, AfterValidator(unreserved)] = Field(min_length=1, max_length=255, pattern=SERVER_NAME_PATTERN)
    description: Annotated[str | None, AfterValidator(_without_nul)] = Field(None, max_length=1000)
    transport_type: TransportType
    connection_config: dict[str, Any]
    health_check_url: AnyHttpUrl | None = None
    auto_connect: bool = True
    namespace: str | None = Field(
        None, pattern=NAMESPACE_PATTERN, description="Only the owner may name one; default: the caller's namespace"
    )
    new_tools: NewToolsPolicy | None = Field(
        None,
        description="Tools that appear after the first tool list: 'auto' (listed at once; owner and admin only) "
        "or 'review' (held for an admin); default: 'auto' for an owner or admin, 'review' for anyone else",
    )
    allow_insecure: bool = False
    """Accept plain ``http://`` upstream and health check URLs on a non-loopback host."""

    @model_validator(mode="after")
    def _check_connection_config(self) -> RegisterServerRequest:
        errors = [
            InitErrorDetails(
                type=PydanticCustomError("value_error", message),
                loc=("connection_config", field),
                input=_shown_field(self.transport_type, self.connection_config, field),
            )
            for field, message in config_problems(
                self.transport_type, self.connection_config, allow_insecure=self.allow_insecure
            )
        ]
        health = str(self.health_check_url) if self.health_check_url else None
        if health and (
            problem := insecure_url_problem("health_check_url", health, self.allow_insecure) or url_problem(health)
        ):
            errors.append(
                InitErrorDetails(
                    type=PydanticCustomError("value_error", problem), loc=("health_check_url",), input=mask_url(health)
                )
            )
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self


class ServerCreated(BaseModel):
    """The 201 body of a registration."""

    id: str
    name: str
    namespace: str
    description: str | None
    transport_type: TransportType
    status: ServerStatus
    health_check_url: ShownUrl
    tool_count: int
    registered_at: datetime
    connected_at: datetime | None


class ServerSummary(BaseModel):
    """One item of ``GET /servers``."""

    id: str
    name: str
    namespace: str
    description: str | None
    transport_type: TransportType
    status: ServerStatus
    tool_count: int
    last_health_check: datetime | None
    registered_at: datetime
    connected_at: datetime | None
    created_by: str | None = Field(None, description="The principal (agent) that registered the server")
    tools: list[ToolInfo] | None = None
    # BR-006 health of the latest check, and why the server is in ERROR (as in the detail).
    consecutive_failures: int = 0
    last_response_time_ms: float | None = None
    error_message: str | None = None
    needs_authorization: bool = False
    """In ERROR waiting for an OAuth authorization (``POST .../authorize``), retried by nobody until then."""


class ServerDetail(BaseModel):
    """``GET /servers/{id}``; ``connection_config`` is masked."""

    id: str
    name: str
    namespace: str
    new_tools: NewToolsPolicy = NewToolsPolicy.AUTO
    description: str | None
    transport_type: TransportType
    connection_config: dict[str, Any]
    status: ServerStatus
    health_check_url: ShownUrl
    last_health_check: datetime | None
    tool_count: int
    error_message: str | None
    registered_at: datetime
    connected_at: datetime | None
    updated_at: datetime
    # BR-006 health metrics of the latest check.
    consecutive_failures: int = 0
    last_response_time_ms: float | None = None
    last_error: str | None = None
    created_by: str | None = Field(None, description="The principal (agent) that registered the server")
    next_retry_at: datetime | None = Field(
        None, description="In ERROR after a network failure: when toolmesh connects it again by itself"
    )
    needs_authorization: bool = Field(
        False,
        description="In ERROR waiting for an OAuth authorization (POST .../authorize), retried by nobody until then",
    )


class ServerList(BaseModel):
    """``GET /servers``."""

    servers: list[ServerSummary]
    total: int
    limit: int
    offset: int


class ConnectResponse(BaseModel):
    """``POST /servers/{id}/connect``."""

    server_id: str
    status: ServerStatus
    message: str


class DisconnectRequest(BaseModel):
    """``POST /servers/{id}/disconnect`` (body optional)."""

    model_config = ConfigDict(extra="forbid")  # {"froce": true} must not drain instead of cancelling

    force: bool = False


class DisconnectResponse(BaseModel):
    """``POST /servers/{id}/disconnect``; status ``DISCONNECTING`` while calls drain."""

    server_id: str
    status: str
    pending_requests: int
    message: str


class RefreshResponse(BaseModel):
    """``POST /servers/{id}/tools/refresh`` (202)."""

    server_id: str
    status: str = "REFRESHING"
    message: str = "Tool discovery initiated"


class ToolInfo(BaseModel):
    """One tool of ``GET /servers/{id}/tools``."""

    id: str
    name: str
    original_name: str
    description: str | None
    category: ToolCategory
    skill_ids: list[str]
    primary_skill_id: str | None
    is_classified: bool
    discovered_at: datetime
    input_schema: dict[str, Any] | None = None
    held: HeldChange | None = None
    classification_status: str = "DISCOVERED"  # DISCOVERED (waiting), CLASSIFIED, UNCLASSIFIED (gave up)
    classification_error: str | None = None
    title: str | None = None
    annotations: dict[str, Any] | None = None  # readOnlyHint, destructiveHint, ... as the upstream gave them
    output_schema: dict[str, Any] | None = None  # with the input schema only


class HeldChange(BaseModel):
    """Why a tool is held back from clients until an admin approves its current definition."""

    reason: str  # "changed" (a part of the definition changed, named in ``fields``), "new" (policy ``review``),
    # or "flagged" (the poisoning scanner's findings, one line each in ``fields``)
    fields: list[str]
    definition_hash: str
    approved_hash: str | None


class ToolList(BaseModel):
    """``GET /servers/{id}/tools``; held tools are listed here (for admins), never to MCP clients."""

    tools: list[ToolInfo]
    total: int
    classified: int
    unclassified: int
    held: int = 0


class ClassifyResponse(BaseModel):
    """``POST /servers/{id}/tools/classify`` (202): the unclassified tools queued for classification."""

    server_id: str
    tools: list[str]
    status: str = "CLASSIFYING"


class ApproveToolsRequest(BaseModel):
    """``POST /servers/{id}/tools/approve``: approve these held tools (all held tools when omitted)."""

    model_config = ConfigDict(extra="forbid")

    tools: list[str] | None = Field(None, description="Original tool names; omit to approve every held tool")


class ApproveInstructionsResponse(BaseModel):
    """``POST /servers/{id}/instructions/approve``: whether held instructions were approved (false:
    nothing was held)."""

    server_id: str
    approved: bool


class ApproveToolsResponse(BaseModel):
    """The tools whose current definitions are now approved."""

    server_id: str
    approved: list[str]


class HistoryEntry(BaseModel):
    """One row of a server's connection history."""

    event_type: str
    details: dict[str, Any]
    timestamp: datetime


ServerSummary.model_rebuild()
ToolInfo.model_rebuild()
