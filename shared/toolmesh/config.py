"""One Settings object for every toolmesh role.

Our own knobs use the ``TOOLMESH_`` prefix; the deployment contract's variables keep their
contract names and defaults (``MCP_AGGREGATOR_*``, ``MCP_CREDENTIAL_KEY``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _contract(name: str) -> AliasChoices:
    return AliasChoices(name)


class Settings(BaseSettings):
    """Configuration of a toolmesh process, read once at start and passed in."""

    model_config = SettingsConfigDict(env_prefix="TOOLMESH_", extra="ignore", populate_by_name=True)

    # Where the backing services are; None means "start an embedded one" (toolmesh up only).
    nats_url: str | None = None
    database_url: str | None = None
    qdrant_url: str | None = None

    data_dir: Path = Path.home() / ".toolmesh"
    host: str = "127.0.0.1"
    port: int = 8081
    admin_token: str | None = None
    worker_id: str | None = None
    log_level: str = "INFO"

    lease_ttl_seconds: float = 10.0
    lease_renew_seconds: float = 3.0
    reconcile_interval_seconds: float = 5.0
    projection_wait_seconds: float = 2.0
    connect_retries: int = 3
    connect_backoff_seconds: tuple[float, ...] = (1.0, 2.0, 4.0)
    drain_timeout_seconds: float = 30.0

    # Health monitoring (BR-006, EC-001, EC-010); the interval itself is a contract variable below.
    health_check_timeout_seconds: float = 5.0
    reconnect_attempts: int = 5
    reconnect_backoff_seconds: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
    reconnect_hold_seconds: float = 5.0  # how long a call waits for a reconnect in progress
    # Observability: each non-gateway role serves /metrics on this port when set; a token guards
    # the gateway's and roles' /metrics when set (Prometheus sends it as a bearer token).
    metrics_port: int | None = None
    metrics_token: str | None = None

    # The deployment contract's variables, under their contract names.
    aggregator_enabled: bool = Field(True, validation_alias=_contract("MCP_AGGREGATOR_ENABLED"))
    max_servers: int = Field(50, validation_alias=_contract("MCP_AGGREGATOR_MAX_SERVERS"))
    health_interval_seconds: float = Field(30, validation_alias=_contract("MCP_AGGREGATOR_HEALTH_INTERVAL"))
    connection_timeout_seconds: float = Field(30, validation_alias=_contract("MCP_AGGREGATOR_CONNECTION_TIMEOUT"))
    request_timeout_seconds: float = Field(60, validation_alias=_contract("MCP_AGGREGATOR_REQUEST_TIMEOUT"))
    credential_key: str | None = Field(None, validation_alias=_contract("MCP_CREDENTIAL_KEY"))
    max_tools_per_server: int = 1000
    max_total_tools: int = 10_000

    # Search and skills: the index lives in data_dir / "index" unless qdrant_url is set.
    skills_file: Path | None = None
    classifier: str = "embedding"  # or "llm": any OpenAI-compatible chat endpoint
    classifier_llm_base_url: str | None = None
    classifier_llm_model: str | None = None
    classifier_llm_api_key: str | None = None

    # The MCP front door (/mcp, `toolmesh mcp`): every tool ("all") or meta-tools ("search"), which
    # a connection may override with ``?mode=``; and code mode (the ``run`` meta-tool's sandbox).
    mcp_mode: Literal["all", "search"] = "all"
    mcp_name_separator: str = Field("__", pattern=r"^[a-zA-Z0-9_-]{1,8}$")
    code_timeout_seconds: float = Field(30.0, gt=0)
    code_max_memory_bytes: int = Field(128 * 1024 * 1024, gt=0)
    code_max_workers: int = Field(2, ge=1)
