"""REST bodies of resources and prompts: listings per server, ``POST /resources/read``, ``POST /prompts/get``,
and the approval of held prompts and resource templates.

Items are the upstream's own wire form (``uri``, ``name``, ``mimeType``, ...), unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class HeldTemplate(BaseModel):
    """A resource template held back from clients, with the poisoning scanner's findings (one line each)."""

    uri_template: str
    findings: list[str]


class FlaggedResource(BaseModel):
    """A fixed resource whose name, title or description the poisoning scanner flags (listed to clients
    still: it is reported, not held), with the findings (one line each)."""

    uri: str
    findings: list[str]


class ResourceList(BaseModel):
    """``GET /api/v1/aggregator/servers/{id}/resources``: resources and resource templates of one server."""

    resources: list[dict[str, Any]]
    resource_templates: list[dict[str, Any]]
    total: int
    held_templates: list[HeldTemplate] = Field(default_factory=list)
    """Templates listed in ``resource_templates`` that clients are not shown: the poisoning scanner flags
    them and no admin approved them (``POST …/resources/approve``)."""
    flagged_resources: list[FlaggedResource] = Field(default_factory=list)
    """Resources listed in ``resources`` whose text the poisoning scanner flags."""


class ApproveTemplatesRequest(BaseModel):
    """``POST /servers/{id}/resources/approve``: approve these held resource templates (all when omitted)."""

    model_config = ConfigDict(extra="forbid")

    templates: list[str] | None = Field(None, description="URI templates; omit to approve every held template")


class ApproveTemplatesResponse(BaseModel):
    """The resource templates (by URI template) whose current definitions are now approved."""

    server_id: str
    approved: list[str]


class HeldPrompt(BaseModel):
    """A prompt held back until an admin approves its current definition (``toolmesh.pinning``)."""

    name: str
    reason: str = Field(description="changed: its definition changed since it was approved; new: new under review")
    fields: list[str] = Field(default_factory=list, description="the parts that changed: description, title, ...")


class PromptList(BaseModel):
    """``GET /api/v1/aggregator/servers/{id}/prompts``: the approved prompts of one server, and the held ones."""

    prompts: list[dict[str, Any]]
    total: int
    held: list[HeldPrompt] = Field(default_factory=list)


class ApprovePromptsRequest(BaseModel):
    """``POST /servers/{id}/prompts/approve``: approve these held prompts (all held prompts when omitted)."""

    model_config = ConfigDict(extra="forbid")

    prompts: list[str] | None = Field(None, description="Original prompt names; omit to approve every held prompt")


class ApprovePromptsResponse(BaseModel):
    """The prompts whose current definitions are now approved."""

    server_id: str
    approved: list[str]


class ReadResourceRequest(BaseModel):
    """Read a resource by URI; the server is found by URI (docs/usage.md: collisions) unless ``server_id`` says."""

    model_config = ConfigDict(extra="forbid")

    uri: str = Field(min_length=1, max_length=8192)
    server_id: str | None = None
    timeout_seconds: float | None = Field(None, gt=0, le=3600)


class GetPromptRequest(BaseModel):
    """Get a prompt by namespaced name (``server.prompt``), original name, or original name plus ``server_id``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=512)
    arguments: dict[str, str] = Field(default_factory=dict)
    server_id: str | None = None
    timeout_seconds: float | None = Field(None, gt=0, le=3600)


class ForwardMetadata(BaseModel):
    """Which server answered."""

    routed_to: str
    server_id: str


class ReadResourceResponse(BaseModel):
    """The upstream's ``resources/read`` result (``contents``: text or base64 ``blob``) plus where it came from."""

    contents: list[dict[str, Any]]
    metadata: ForwardMetadata


class GetPromptResponse(BaseModel):
    """The upstream's ``prompts/get`` result (``description``, ``messages``) plus where it came from."""

    description: str | None = None
    messages: list[dict[str, Any]]
    metadata: ForwardMetadata
