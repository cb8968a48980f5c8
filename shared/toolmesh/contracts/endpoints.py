"""``/api/v1/endpoints``: bundles — named selections of tools, prompts and resources of several
upstreams, with renamed, re-described or disabled tools — served at ``/mcp/{name}``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from toolmesh.naming import NAMESPACE_PATTERN, SERVER_NAME_PATTERN, unreserved

PUBLIC_TOOL_NAME = r"^[a-zA-Z0-9_-]{1,64}$"
"""What an override may rename a tool to: a name every common LLM API accepts."""
SELECTOR = r"^[^\x00]{1,512}$"


class ToolOverride(BaseModel):
    """How a bundle shows one tool (key: ``server.tool``): another name, another description, or off."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, pattern=PUBLIC_TOOL_NAME)
    description: str | None = Field(None, max_length=10_000)
    enabled: bool = True


class EndpointRequest(BaseModel):
    """``POST /api/v1/endpoints`` and ``PUT /api/v1/endpoints/{id}``.

    ``include`` and ``exclude`` are glob patterns over ``server.tool``, ``server.prompt`` and
    ``server.<resource URI>`` (``github.*`` is everything of ``github``); ``exclude`` wins.
    """

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, AfterValidator(unreserved)] = Field(min_length=1, max_length=255, pattern=SERVER_NAME_PATTERN)
    description: str | None = Field(None, max_length=1000)
    include: list[str] = Field(min_length=1, max_length=500)
    exclude: list[str] = Field(default_factory=list, max_length=500)
    overrides: dict[str, ToolOverride] = Field(default_factory=dict, max_length=1000)
    namespace: str | None = Field(None, pattern=NAMESPACE_PATTERN, description="Owner only; default: yours")

    @field_validator("include", "exclude")
    @classmethod
    def _selectors(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value or "\x00" in value or len(value) > 512:
                raise ValueError("selectors are 1-512 characters, without NUL")
        return values

    @field_validator("overrides")
    @classmethod
    def _override_keys(cls, overrides: dict[str, ToolOverride]) -> dict[str, ToolOverride]:
        renamed: dict[str, str] = {}
        for key, override in overrides.items():
            if "." not in key or "\x00" in key:
                raise ValueError(f"override keys are server.tool names, not {key!r}")
            if override.name is not None:
                if override.name in renamed:
                    raise ValueError(f"{key} and {renamed[override.name]} are both renamed {override.name!r}")
                renamed[override.name] = key
        return overrides


class EndpointInfo(BaseModel):
    """An endpoint as stored, with the path it is served at."""

    id: str
    name: str
    namespace: str
    description: str | None
    include: list[str]
    exclude: list[str]
    overrides: dict[str, ToolOverride]
    path: str
    created_by: str | None
    created_at: datetime
    updated_at: datetime


class EndpointList(BaseModel):
    """``GET /api/v1/endpoints``."""

    endpoints: list[EndpointInfo]
    total: int
