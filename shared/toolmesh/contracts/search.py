"""``POST /api/v1/search`` (system contract, Extended Search API); also the MCP meta-tool's shapes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolmesh.categories import ToolCategory


class SearchRequest(BaseModel):
    """A search over tools of servers that are CONNECTED or DEGRADED."""

    model_config = ConfigDict(extra="forbid")  # a misspelt filter would silently widen the search

    query: str = Field(min_length=1, max_length=100_000)
    item_type: Literal["tool"] = "tool"
    include_external: bool = True
    server_filter: list[str] | None = None
    categories: list[ToolCategory] | None = Field(None, description="Only tools of these categories")
    namespace: str | None = None
    limit: int = Field(10, ge=1, le=100)
    skill_threshold: float = Field(0.4, ge=0.0, le=1.0)
    tool_threshold: float = Field(0.0, ge=0.0, le=1.0)
    include_schemas: bool = False
    strategy: Literal["hierarchical", "flat"] = "hierarchical"


class SourceServer(BaseModel):
    id: str
    name: str
    status: str


class ToolHit(BaseModel):
    """One tool found; ``score`` is the fused rank score scaled to [0, 1]."""

    id: str
    db_id: int | None = None
    type: Literal["tool"] = "tool"
    name: str
    original_name: str
    description: str | None = None
    score: float
    skill_ids: list[str] = Field(default_factory=list)
    primary_skill_id: str | None = None
    is_classified: bool = False
    category: str | None = None
    source_server: SourceServer
    input_schema: dict[str, Any] | None = None


class MatchedSkill(BaseModel):
    """A skill the query matched (hierarchical strategy), with its cosine similarity."""

    id: str
    name: str
    description: str
    score: float
    tool_count: int = 0


class SearchMetadata(BaseModel):
    strategy_used: Literal["hierarchical", "flat"]
    retrieval: Literal["hybrid", "bm25"]
    servers_searched: int
    external_tools_count: int
    total_time_ms: float


class SearchResponse(BaseModel):
    query: str
    tools: list[ToolHit]
    matched_skills: list[MatchedSkill]
    metadata: SearchMetadata


SEARCH_QUEUE = "search"
"""Queue group of the processes answering the ``search`` verbs (``toolmesh.platform.bus.verbs``)."""


class SearchQuery(BaseModel):
    """A search forwarded over NATS, with the caller's namespace (never taken from the request body)."""

    request: SearchRequest
    namespace: str | None = None


class SearchHealthQuery(BaseModel):
    """A search health request forwarded over NATS: the caller's namespace (None: the owner, every one)."""

    namespace: str | None = None
