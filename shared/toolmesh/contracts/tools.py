"""REST bodies of ``POST /api/v1/tools/call`` (system contract, "Extended Tool Execution API")."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ToolCallRequest(BaseModel):
    """A call by namespaced name (``server.tool``), original name, or original name plus ``server_id``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=512)
    arguments: dict[str, Any] = Field(default_factory=dict)
    server_id: str | None = None
    timeout_seconds: float | None = Field(
        None, gt=0, le=3600, description="Defaults to MCP_AGGREGATOR_REQUEST_TIMEOUT (60 s)"
    )


class ToolCallMetadata(BaseModel):
    """Where the call went and how long each part took."""

    routed_to: str
    server_id: str
    routing_time_ms: float
    execution_time_ms: float
    total_time_ms: float
    warning: str | None = None


class ToolCallResponse(BaseModel):
    """The upstream result, forwarded (``isError`` included), plus routing metadata."""

    model_config = ConfigDict(populate_by_name=True)

    content: list[dict[str, Any]]
    is_error: bool = Field(alias="isError")
    structured_content: dict[str, Any] | None = Field(None, alias="structuredContent")
    metadata: ToolCallMetadata
