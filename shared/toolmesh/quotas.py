"""Fair share between namespaces: the limits one namespace (tenant) works within, beside the
deployment-wide ones, so that one tenant cannot use up what every tenant shares.

Each limit has a deployment default (``TOOLMESH_NAMESPACE_*``); ``TOOLMESH_NAMESPACE_LIMITS``
overrides any of them for named namespaces (JSON: ``{"team-a": {"max_servers": 40}}``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


class NamespaceLimitOverrides(BaseModel):
    """One namespace's own values of some limits (the others keep the deployment's defaults)."""

    model_config = ConfigDict(extra="forbid")

    max_servers: int | None = Field(default=None, ge=1)
    max_tools: int | None = Field(default=None, ge=1)
    max_mcp_sessions: int | None = Field(default=None, ge=1)
    calls_per_second: float | None = Field(default=None, ge=0)
    calls_burst: int | None = Field(default=None, ge=1)
    code_workers: int | None = Field(default=None, ge=1)


@dataclass(frozen=True)
class NamespaceQuota:
    """The limits one namespace works within."""

    max_servers: int
    """Servers registered in the namespace (409 ``LIMIT_EXCEEDED`` past it)."""
    max_tools: int
    """Tools of the namespace's servers together (a server past it goes to ERROR, ``LIMIT_EXCEEDED``)."""
    max_mcp_sessions: int
    """MCP client sessions of the namespace one gateway replica holds at once (409 ``LIMIT_EXCEEDED``)."""
    key_max_mcp_sessions: int
    """Of those, the sessions one key (principal) holds at once (409 ``LIMIT_EXCEEDED``), so that one
    key cannot take the namespace's every session from its other keys."""
    calls_per_second: float
    """Tool calls per second of the namespace on one gateway replica (0: no limit; 429 ``RATE_LIMITED``)."""
    calls_burst: int
    """Tool calls the namespace may make at once above its rate."""
    code_workers: int
    """Code-mode workers the namespace's runs hold at once (further runs wait their turn)."""


def key_sessions_default(namespace_sessions: int, per_key: int | None) -> int:
    """The MCP sessions one key may hold: as set (at most the namespace's), else a quarter of the
    namespace's (at least one)."""
    return min(namespace_sessions, per_key) if per_key is not None else max(1, namespace_sessions // 4)


def code_workers_default(pool: int, per_namespace: int | None) -> int:
    """The code-mode workers one namespace may hold: as set, else half the pool (at least one)."""
    return min(pool, per_namespace) if per_namespace is not None else max(1, pool // 2)
