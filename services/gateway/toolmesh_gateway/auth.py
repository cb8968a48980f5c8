"""Bearer authentication and roles.

API keys are looked up hashed in the database; the role and namespace of a key come from its row,
never from anything the caller sends. Optionally, JWTs of an identity provider are verified
(``jwt_bearer``). Hits are cached briefly; a revoked key (event ``key.revoked``) leaves the cache
of every gateway as soon as the gateway's event feed delivers it. Failed attempts are rate limited
per client address (``auth_failures``) on REST, ``/mcp`` and the console (which uses REST).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import asyncpg
from fastapi import Request

from toolmesh.contracts.events import Event
from toolmesh.contracts.keys import Role
from toolmesh.contracts.namespace_events import AppDisconnected, KeyRevoked
from toolmesh.credentials import hash_token
from toolmesh.errors import Forbidden, Unauthorized
from toolmesh.platform.config import Settings
from toolmesh.platform.store.principals import principal_for_token_hash
from toolmesh_gateway.auth_failures import AuthFailures
from toolmesh_gateway.authorization_server.provider import ACCESS_PREFIX
from toolmesh_gateway.authorization_server.store import grant_by_access
from toolmesh_gateway.jwt_bearer import JwtVerifier, looks_like_jwt

JWT_PRINCIPAL_PREFIX = "jwt:"
"""The key id of a JWT caller is this prefix and its subject (it has no row in ``mcp.principals``)."""
_CACHE_SECONDS = 30.0
_MAX_CACHED = 10_000


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its key, role and home namespace."""

    key_id: str
    name: str
    role: Role
    namespace: str
    endpoints: frozenset[str] | None = None  # a key limited to these MCP endpoints (None: not limited)
    token: str | None = field(default=None, repr=False, compare=False)
    """The JWT a principal of the identity provider presented (exchanged for upstream tokens, RFC 8693);
    None for an API key."""
    audience: str | None = None
    """The one MCP endpoint (``/mcp`` or ``/mcp/{name}``) an OAuth access token of this gateway is
    for; None for an API key or a JWT."""
    grant_id: str | None = None
    """The connected app an OAuth access token belongs to."""

    @property
    def scope(self) -> str | None:
        """The namespace the caller sees; None for the owner, who sees every namespace."""
        return None if self.role is Role.OWNER else self.namespace

    @property
    def manages(self) -> bool:
        """True for roles that manage servers, keys, endpoints and approvals (owner, admin)."""
        return self.role.manages

    def require_manager(self, action: str) -> None:
        """``Forbidden`` unless the caller may manage its namespace."""
        if not self.manages:
            raise Forbidden(f"Role '{self.role}' may not {action}", {"role": str(self.role), "action": action})

    def require_api_access(self) -> None:
        """``Forbidden`` for a key limited to MCP endpoints, or an OAuth token (it is for one MCP
        endpoint): they may use nothing else (REST, NATS API)."""
        self.require_own_credentials()
        self.require_every_endpoint()

    def require_own_credentials(self) -> None:
        """``Forbidden`` for an OAuth access token of this gateway: it is for one MCP endpoint only,
        never a sign-in of its own (an API key or a JWT is)."""
        if self.audience is not None:
            raise Forbidden(f"This token is for the MCP endpoint {self.audience} only", {"endpoints": [self.audience]})

    def require_every_endpoint(self) -> None:
        """``Forbidden`` for a key limited to some MCP endpoints (``/mcp/{name}``): the aggregate ``/mcp``
        is none of them. An OAuth token passes: its endpoint was matched against the path already."""
        if self.endpoints is not None:
            raise Forbidden(
                "This key may only use its MCP endpoints: " + ", ".join(f"/mcp/{n}" for n in sorted(self.endpoints)),
                {"endpoints": sorted(self.endpoints)},
            )

    def require_registrar(self) -> None:
        """``Forbidden`` unless the caller may register servers (owner, admin, agent)."""
        if self.role is Role.USER:
            raise Forbidden(
                f"Role '{self.role}' may not register servers", {"role": str(self.role), "action": "register servers"}
            )

    def manages_server(self, created_by: str | None) -> bool:
        """True for the owner, an admin, and the agent that registered the server (``created_by``)."""
        return self.manages or (self.role is Role.AGENT and created_by == self.name)

    def owns(self, created_by: str | None) -> bool:
        """False when an agent looks at a server another principal registered: for it, that server
        is not there to manage (404, never 403). Every other role passes (its role decides)."""
        return self.role is not Role.AGENT or created_by == self.name

    def home(self, requested: str | None) -> str:
        """The namespace a write lands in: the caller's own, or (owner only) the one it names."""
        if requested is None or requested == self.namespace:
            return self.namespace
        if self.role is not Role.OWNER:
            raise Forbidden(
                f"Only the owner may act in another namespace than '{self.namespace}'",
                {"namespace": requested},
            )
        return requested


@dataclass(frozen=True)
class Caller:
    """Who asked, and from where: recorded in events and the audit log."""

    principal: Principal
    ip_address: str | None = None
    namespace: str | None = None  # set when the caller works in one namespace (an MCP session)
    origin: str | None = None  # the base URL it reached this gateway at (HTTP callers)

    @property
    def scope(self) -> str | None:
        """The namespace the caller acts in (None: every namespace, the owner's REST calls)."""
        return self.namespace if self.namespace is not None else self.principal.scope

    @property
    def actor(self) -> str:
        """The principal's name, as the audit log shows it."""
        return self.principal.name


class Authenticator:
    """Resolves bearer tokens to principals, caching hits briefly."""

    def __init__(self, db: asyncpg.Pool, settings: Settings) -> None:
        self._db = db
        self.public_url = settings.public_url
        self._jwt = JwtVerifier.configured(settings)
        self._cache: dict[str, tuple[float, Principal]] = {}
        self._revoked: set[str] = set()  # a lookup that raced a revocation must not cache the key again
        self._failures = AuthFailures(settings.auth_failure_limit, settings.auth_failure_window_seconds)

    async def principal_from(self, authorization: str | None, source: str | None) -> Principal:
        """``principal`` for a caller at client address ``source``: ``RateLimited`` (429) while that
        address has too many failed attempts, right credentials or not; each refused one counts."""
        self._failures.check(source)
        try:
            return await self.principal(authorization)
        except Unauthorized:
            if authorization:  # credentials were presented (a guess); none at all guesses nothing
                self._failures.failed(source)
            raise

    async def principal(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header; ``Unauthorized`` otherwise."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("Missing bearer token")
        if self._jwt is not None and looks_like_jwt(token):
            subject, role, namespace = self._jwt.identity(await self._jwt.claims(token))
            return Principal(
                key_id=f"{JWT_PRINCIPAL_PREFIX}{subject}", name=subject, role=role, namespace=namespace, token=token
            )
        digest = hash_token(token)
        cached = self._cache.get(digest)
        if cached and cached[0] > time.monotonic():
            return cached[1]
        lifetime = _CACHE_SECONDS
        if token.startswith(ACCESS_PREFIX):
            grant = await grant_by_access(self._db, digest)
            if grant is None:
                raise Unauthorized("Invalid or expired access token")
            principal = _principal(grant, grant["key_id"], grant["key_name"])
            principal = dataclasses.replace(principal, audience=_path(grant["resource"]), grant_id=grant["grant_id"])
            lifetime = min(lifetime, grant["access_expires_at"].timestamp() - time.time())
        else:
            row = await principal_for_token_hash(self._db, digest)
            if row is None:
                raise Unauthorized("Invalid bearer token")
            principal = _principal(row, row["id"], row["name"])
        if principal.key_id in self._revoked or principal.grant_id in self._revoked:
            raise Unauthorized("Invalid bearer token")
        if len(self._cache) >= _MAX_CACHED:
            self._cache.clear()
        self._cache[digest] = (time.monotonic() + lifetime, principal)
        return principal

    def forget(self, key_id: str) -> None:
        """Drop a key, or a connected app's grant, from the cache (it was revoked): its tokens are
        refused from now on."""
        if len(self._revoked) >= _MAX_CACHED:
            self._revoked.clear()
        self._revoked.add(key_id)
        for digest, (_, principal) in list(self._cache.items()):
            if key_id in (principal.key_id, principal.grant_id):
                del self._cache[digest]

    def on_event(self, event: Event) -> None:
        """Follow the event stream: a revoked key or connected app is refused from now on."""
        if isinstance(event, KeyRevoked):
            self.forget(event.key_id)
        elif isinstance(event, AppDisconnected):
            self.forget(event.grant_id)


def _principal(row: asyncpg.Record, key_id: str, name: str) -> Principal:
    limited = row["endpoints"]
    return Principal(
        key_id=key_id,
        name=name,
        role=Role(row["role"]),
        namespace=row["namespace"],
        endpoints=frozenset(limited) if limited is not None else None,
    )


def _path(resource: str) -> str:
    """The endpoint path of a token's resource URL (checked against the request's path)."""
    return urlsplit(resource).path.rstrip("/") or "/"


async def _authenticated(request: Request) -> Principal:
    authenticator: Authenticator = request.app.state.authenticator
    source = request.client.host if request.client else None
    principal = await authenticator.principal_from(request.headers.get("authorization"), source)
    request.app.state.rate_limiter.check(principal.key_id)
    return principal


async def require_principal(request: Request) -> Principal:
    """FastAPI dependency guarding every REST endpoint (a key limited to MCP endpoints may not use them)."""
    principal = await _authenticated(request)
    principal.require_api_access()
    return principal


async def require_signer(request: Request) -> Principal:
    """FastAPI dependency of the consent page's API: an API key or JWT, a key limited to MCP endpoints
    included (it may allow MCP clients at its own endpoints); never an OAuth access token."""
    principal = await _authenticated(request)
    principal.require_own_credentials()
    return principal
