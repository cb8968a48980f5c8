"""REST bodies of the server endpoints (system contract, "Server Management")."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from toolmesh.lifecycle import ServerStatus
from toolmesh.naming import SERVER_NAME_PATTERN


class TransportType(StrEnum):
    """Upstream transports; ``HTTP`` is MCP Streamable HTTP."""

    STDIO = "STDIO"
    SSE = "SSE"
    HTTP = "HTTP"


# Required and optional fields of connection_config per transport (BR-001).
CONFIG_FIELDS: dict[TransportType, tuple[str, dict[str, type]]] = {
    TransportType.STDIO: ("command", {"args": list, "env": dict, "cwd": str}),
    TransportType.SSE: ("url", {"headers": dict}),
    TransportType.HTTP: ("base_url", {"headers": dict}),
}


def config_problems(transport: TransportType, config: dict[str, Any]) -> list[tuple[str, str]]:
    """``(field, message)`` for every way ``config`` breaks BR-001 for ``transport``."""
    required, optional = CONFIG_FIELDS[transport]
    problems: list[tuple[str, str]] = []
    value = config.get(required)
    if not isinstance(value, str) or not value.strip():
        problems.append((required, f"{transport} transport requires '{required}' in connection_config"))
    elif required != "command" and not value.startswith(("http://", "https://")):
        problems.append((required, f"'{required}' must be an http(s) URL"))
    for name, kind in optional.items():
        if name in config and not isinstance(config[name], kind):
            problems.append((name, f"'{name}' must be a {kind.__name__}"))
    if transport is TransportType.STDIO and isinstance(config.get("args"), list):
        if not all(isinstance(a, str) for a in config["args"]):
            problems.append(("args", "'args' must be a list of strings"))
    for mapping in ("env", "headers"):
        if isinstance(config.get(mapping), dict) and not all(isinstance(v, str) for v in config[mapping].values()):
            problems.append((mapping, f"'{mapping}' values must be strings"))
    return problems


class RegisterServerRequest(BaseModel):
    """``POST /api/v1/aggregator/servers``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=255, pattern=SERVER_NAME_PATTERN)
    description: str | None = Field(None, max_length=1000)
    transport_type: TransportType
    connection_config: dict[str, Any]
    health_check_url: AnyHttpUrl | None = None
    auto_connect: bool = True

    @model_validator(mode="after")
    def _check_connection_config(self) -> RegisterServerRequest:
        problems = config_problems(self.transport_type, self.connection_config)
        if problems:
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [
                    InitErrorDetails(
                        type=PydanticCustomError("value_error", message),
                        loc=("connection_config", field),
                        input=self.connection_config.get(field),
                    )
                    for field, message in problems
                ],
            )
        return self


class ServerCreated(BaseModel):
    """The 201 body of a registration."""

    id: str
    name: str
    description: str | None
    transport_type: TransportType
    status: ServerStatus
    health_check_url: str | None
    tool_count: int
    registered_at: datetime
    connected_at: datetime | None


class ServerSummary(BaseModel):
    """One item of ``GET /servers``."""

    id: str
    name: str
    description: str | None
    transport_type: TransportType
    status: ServerStatus
    tool_count: int
    last_health_check: datetime | None
    registered_at: datetime
    connected_at: datetime | None
    tools: list[ToolInfo] | None = None


class ServerDetail(BaseModel):
    """``GET /servers/{id}``; ``connection_config`` is masked."""

    id: str
    name: str
    description: str | None
    transport_type: TransportType
    connection_config: dict[str, Any]
    status: ServerStatus
    health_check_url: str | None
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
    skill_ids: list[str]
    primary_skill_id: str | None
    is_classified: bool
    discovered_at: datetime
    input_schema: dict[str, Any] | None = None


class ToolList(BaseModel):
    """``GET /servers/{id}/tools``."""

    tools: list[ToolInfo]
    total: int
    classified: int
    unclassified: int


class HistoryEntry(BaseModel):
    """One row of a server's connection history."""

    event_type: str
    details: dict[str, Any]
    timestamp: datetime


ServerSummary.model_rebuild()
