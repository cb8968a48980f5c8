"""REST bodies of the server endpoints (system contract, "Server Management")."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import urlsplit

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
from toolmesh.contracts.headers import headers_problems
from toolmesh.contracts.sandbox import sandbox_problems
from toolmesh.credentials import mask_config, protected_references
from toolmesh.egress import rest_base_problem, url_problem
from toolmesh.lifecycle import ServerStatus
from toolmesh.loopback import is_loopback_host
from toolmesh.naming import NAMESPACE_PATTERN, SERVER_NAME_PATTERN
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


class TransportType(StrEnum):
    """Upstream kinds: MCP over STDIO, SSE or Streamable HTTP (``HTTP``), and plain REST tool servers
    (``GET /health``, ``GET /tools``, ``POST /tools/execute``)."""

    STDIO = "STDIO"
    SSE = "SSE"
    HTTP = "HTTP"
    REST = "REST"


# Required and optional fields of connection_config per transport (BR-001).
CONFIG_FIELDS: dict[TransportType, tuple[str, dict[str, type]]] = {
    TransportType.STDIO: ("command", {"args": list, "env": dict, "cwd": str, "sandbox": dict}),
    TransportType.SSE: ("url", {"headers": dict}),
    TransportType.HTTP: ("base_url", {"headers": dict}),
    TransportType.REST: ("url", {"headers": dict}),
}


def insecure_url_problem(field: str, url: str, allow_insecure: bool) -> str | None:
    """Why ``url`` breaks the TLS rule (https unless loopback or ``allow_insecure``), else None."""
    parts = urlsplit(url)
    if parts.scheme.lower() == "https" or allow_insecure or is_loopback_host(parts.hostname):
        return None
    return (
        f"'{field}' must use https:// (TLS is required for remote upstreams); plain http:// is accepted only "
        'for a loopback host (127.0.0.0/8, ::1, localhost) or when the registration sets "allow_insecure": true'
    )


def upstream_url_problem(transport: TransportType, url: str) -> str | None:
    """What the egress policy refuses in ``url`` whoever registers it (``toolmesh.egress``): a
    link-local or metadata host in any spelling, and for REST a URL that could bend to another path."""
    problem = url_problem(url)
    if problem is None and transport is TransportType.REST:
        problem = rest_base_problem(url)
    return problem


def config_problems(
    transport: TransportType, config: dict[str, Any], *, allow_insecure: bool = False
) -> list[tuple[str, str]]:
    """``(field, message)`` for every way ``config`` breaks BR-001 or the TLS rule for ``transport``."""
    required, optional = CONFIG_FIELDS[transport]
    problems: list[tuple[str, str]] = []
    value = config.get(required)
    if not isinstance(value, str) or not value.strip():
        problems.append((required, f"{transport} transport requires '{required}' in connection_config"))
    elif required != "command" and not value.lower().startswith(("http://", "https://")):
        problems.append((required, f"'{required}' must be an http(s) URL"))
    elif required != "command" and (problem := insecure_url_problem(required, value, allow_insecure)):
        problems.append((required, problem))
    elif required != "command" and (problem := upstream_url_problem(transport, value)):
        problems.append((required, f"'{required}': {problem}"))
    known = (required, *optional)
    for name in config:
        if name not in known:  # a misspelt "headers" or "env" would silently drop credentials
            problems.append((name, f"unknown field '{name}' for {transport} (known: {', '.join(known)})"))
    for name, kind in optional.items():
        if name in config and not isinstance(config[name], kind):
            problems.append((name, f"'{name}' must be a {kind.__name__}"))
    if transport is TransportType.STDIO and isinstance(config.get("args"), list):
        if not all(isinstance(a, str) for a in config["args"]):
            problems.append(("args", "'args' must be a list of strings"))
    if transport is TransportType.STDIO and isinstance(config.get("sandbox"), dict):
        problems.extend(sandbox_problems(config["sandbox"]))
    for mapping in ("env", "headers"):
        if isinstance(config.get(mapping), dict) and not all(isinstance(v, str) for v in config[mapping].values()):
            problems.append((mapping, f"'{mapping}' values must be strings"))
    if transport is not TransportType.STDIO and isinstance(config.get("headers"), dict):
        problems.extend(("headers", problem) for problem in headers_problems(config["headers"]))
    for field, field_value in config.items():
        if has_nul(field) or has_nul(field_value):
            problems.append((field, f"'{field}' may not contain the NUL character"))
        elif not _utf8(field) or not _utf8(field_value):
            problems.append((field, f"'{field}' may not contain a lone surrogate (text with no UTF-8 form)"))
        elif names := protected_references(field_value):
            listed = ", ".join(sorted(set(names)))
            problems.append((field, f"'{field}' may not reference toolmesh's own variables ({listed})"))
    return problems


def _utf8(value: Any) -> bool:
    """True when every string and key inside ``value`` has a UTF-8 form (no lone surrogate)."""
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def _shown_field(transport: TransportType, config: dict[str, Any], field: str) -> Any:
    """``config[field]`` as an error may echo it (in the 422 body): as ``GET /servers/{id}`` shows it,
    and only ``***`` for headers and env (a bad name may hold a value) and for a field of no known kind."""
    required, optional = CONFIG_FIELDS[transport]
    if field in ("headers", "env") or field not in (required, *optional):
        return MASK
    return mask_config({field: config.get(field)})[field]


def _without_nul(value: str | None) -> str | None:
    if value is not None and has_nul(value):
        raise ValueError("may not contain the NUL character")
    return value


class RegisterServerRequest(BaseModel):
    """``POST /api/v1/aggregator/servers``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=255, pattern=SERVER_NAME_PATTERN)
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

    reason: str  # "changed" (a part of the definition changed, named in ``fields``) or "new" (policy ``review``)
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
