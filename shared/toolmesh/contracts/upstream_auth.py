"""How toolmesh authenticates to an HTTP, SSE, REST or OPENAPI upstream: ``connection_config.auth``.

``{"mode": "oauth", "identity": "shared" | "per_user", "scopes": [...], "client_id": ..., "client_secret": ...}``:
toolmesh is an OAuth 2.1 client of the upstream (MCP authorization; a REST tool server that answers
401 the same way takes it too; an OpenAPI server's authorization server is the one its document's
oauth2 or openIdConnect security scheme names). ``shared``: an owner or admin
authorizes it once (``POST /api/v1/aggregator/servers/{id}/authorize``) and every caller acts upstream
as that one identity. ``per_user``: every principal authorizes once for itself and its calls reach the
upstream as its own user; the catalog is discovered with the identity of one principal that did.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

NEEDS_AUTHORIZATION = "needs authorization:"
"""What the ``error_message`` of a server waiting for an authorization says (after what failed)."""


def waits_for_authorization(status: str, error_message: str | None) -> bool:
    """Whether a server in ``status`` with ``error_message`` waits for someone to authorize it (in
    ERROR, and retried by nobody until then)."""
    return status == "ERROR" and NEEDS_AUTHORIZATION in (error_message or "")


class TokenExchange(BaseModel):
    """``auth.token_exchange``: a caller that presents a JWT of the front door's identity provider gets
    its upstream token by exchanging that JWT (RFC 8693) at the upstream's authorization server, with
    no browser; callers with an API key authorize in the browser as usual."""

    model_config = ConfigDict(extra="forbid")

    token_endpoint: str = Field(min_length=1, max_length=2048, pattern=r"^https?://")
    """Where to exchange, named by the owner or admin who registers the server: never taken from the
    metadata the upstream points to, which could otherwise send every JWT caller's token elsewhere."""
    audience: str | None = Field(default=None, min_length=1, max_length=512)
    """The ``audience`` parameter, when the authorization server wants one besides ``resource``."""


class UpstreamAuth(BaseModel):
    """The ``auth`` member of an SSE, Streamable HTTP, REST or OPENAPI server's ``connection_config``."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["oauth"]
    identity: Literal["shared", "per_user"] = "shared"
    scopes: list[str] | None = Field(default=None, max_length=64)
    """Scopes to ask for; when absent, those of the upstream's challenge or metadata."""
    client_id: str | None = Field(default=None, min_length=1, max_length=512)
    """A client registered in advance at the authorization server; else toolmesh registers one."""
    client_secret: str | None = Field(default=None, min_length=1, max_length=2048)
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post", "none"] | None = None
    """How the pre-registered client authenticates at the token endpoint; when absent, the first of
    ``client_secret_basic``, ``client_secret_post`` the authorization server supports (``none`` without
    a secret)."""
    token_exchange: TokenExchange | None = None
    """Exchange a JWT caller's token for its upstream token (per-user identity, pre-registered client)."""
    scheme: str | None = Field(default=None, min_length=1, max_length=256)
    """An ``OPENAPI`` server's: the ``components.securitySchemes`` entry the grant is for (an oauth2
    scheme with an ``authorizationCode`` flow, or an ``openIdConnect`` one); when absent, the first
    such scheme by name (``toolmesh.contracts.openapi_oauth``)."""


def upstream_auth(config: dict[str, Any]) -> UpstreamAuth | None:
    """The validated ``auth`` of a stored config, or None when it has none (``config_problems`` ran
    at registration)."""
    value = config.get("auth")
    return UpstreamAuth.model_validate(value) if isinstance(value, dict) else None


def auth_problems(value: Any) -> list[tuple[str, str]]:
    """``("auth", message)`` for every way ``value`` is not a usable ``auth`` member."""
    if not isinstance(value, dict):
        return [("auth", "'auth' must be an object")]
    try:
        auth = UpstreamAuth.model_validate(value)
    except ValidationError as exc:
        return [
            ("auth", f"'auth.{'.'.join(str(p) for p in error['loc']) or 'auth'}': {error['msg']}")
            for error in exc.errors(include_input=False)
        ]
    problems: list[tuple[str, str]] = []
    if auth.token_endpoint_auth_method is not None and auth.client_id is None:
        problems.append(("auth", "'auth.token_endpoint_auth_method' is for the pre-registered 'auth.client_id'"))
    if auth.client_secret is not None and auth.client_id is None:
        problems.append(("auth", "'auth.client_secret' needs the 'auth.client_id' it belongs to"))
    if auth.token_exchange is not None and (auth.identity != "per_user" or auth.client_id is None):
        problems.append(
            ("auth", "'auth.token_exchange' needs 'identity': \"per_user\" and the pre-registered 'auth.client_id'")
        )
    if auth.scopes is not None and any(not s or " " in s for s in auth.scopes):
        problems.append(("auth", "'auth.scopes' must be scope tokens (no spaces, not empty)"))
    return problems


class AuthorizeResponse(BaseModel):
    """``POST /servers/{id}/authorize``: where to send the user, and for how long it is valid. A replay of
    the request by its ``Idempotency-Key`` answers ``authorization_url`` null and a ``note``: its ``state``
    is the callback's capability, kept nowhere in clear."""

    server_id: str
    identity: Literal["shared", "per_user"] = "shared"
    """``per_user``: the grant will be the caller's own; ``shared``: every caller's."""
    authorized: bool = False
    """True when the caller is authorized already, by exchanging its token (``authorization_url`` is
    then null: there is nothing to open)."""
    authorization_url: str | None
    expires_in: int
    """Seconds until the authorization must have come back to ``/oauth/callback``."""
    note: str | None = None


class AuthorizationState(BaseModel):
    """``GET /servers/{id}/authorization``: whether a grant is stored for the caller (per-user
    identity) or for every caller (shared)."""

    server_id: str
    identity: Literal["shared", "per_user"]
    authorized: bool
    issuer: str | None = None
    authorized_at: datetime | None = None
    """When the stored grant was last written (an authorization or a refresh)."""
