"""One Settings object for every toolmesh role.

Our own knobs use the ``TOOLMESH_`` prefix; the deployment contract's variables keep their
contract names and defaults (``MCP_AGGREGATOR_*``, ``MCP_CREDENTIAL_KEY``).
"""

from __future__ import annotations

from pathlib import Path

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

    # The deployment contract's variables, under their contract names.
    aggregator_enabled: bool = Field(True, validation_alias=_contract("MCP_AGGREGATOR_ENABLED"))
    max_servers: int = Field(50, validation_alias=_contract("MCP_AGGREGATOR_MAX_SERVERS"))
    health_interval_seconds: float = Field(30, validation_alias=_contract("MCP_AGGREGATOR_HEALTH_INTERVAL"))
    connection_timeout_seconds: float = Field(30, validation_alias=_contract("MCP_AGGREGATOR_CONNECTION_TIMEOUT"))
    request_timeout_seconds: float = Field(60, validation_alias=_contract("MCP_AGGREGATOR_REQUEST_TIMEOUT"))
    credential_key: str | None = Field(None, validation_alias=_contract("MCP_CREDENTIAL_KEY"))
    max_tools_per_server: int = 1000
    max_total_tools: int = 10_000
