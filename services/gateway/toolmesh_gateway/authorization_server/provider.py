"""The storage behind the SDK's OAuth handlers (``mcp.server.auth``): ``/authorize`` parks the request
for the person's consent in the console, the consent yields a single-use code bound to the PKCE
challenge and redirect URI, and ``/token`` turns it into an access token for one MCP endpoint and a
refresh token that rotates on each use. A replayed code or rotated refresh token revokes the grant
it belongs to (RFC 9700 §4.14)."""

from __future__ import annotations

import json
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from toolmesh.credentials import hash_token
from toolmesh.platform.config import Settings
from toolmesh_gateway.authorization_server import store
from toolmesh_gateway.authorization_server.addresses import CONSENT_PAGE, MCP_PATH, OFFLINE_SCOPE, SCOPE, resource_path
from toolmesh_gateway.authorization_server.clients import ClientDirectory
from toolmesh_gateway.authorization_server.revocation import AppRevocations

ACCESS_PREFIX = "tmo_"
"""Access tokens of the authorization server start with this (API keys with ``tm_``)."""
REFRESH_PREFIX = "tmr_"
CODE_SECONDS = 60


class GatewayCode(AuthorizationCode):
    """A code as stored: who consented (an API key's ``key_id``, or a person's ``identity``) and, once
    exchanged, the grant it gave."""

    key_id: str | None
    identity: dict[str, str] | None = None
    grant_id: str | None = None

    @property
    def consenter(self) -> store.Consenter:
        """Who consented, as the grant keeps it."""
        return store.Consenter(key_id=self.key_id, identity=self.identity)


class GatewayRefreshToken(RefreshToken):
    """A refresh token with the grant it belongs to; ``consent_ends``: when the grant of a person of the
    identity provider (no key to revoke) ends, however often it is refreshed."""

    grant_id: str
    key_id: str
    consent_ends: datetime | None = None


class GatewayAccessToken(AccessToken):
    """An access token with the grant it belongs to."""

    grant_id: str


def _new(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def _at(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


class AuthorizationProvider:
    """``OAuthAuthorizationServerProvider`` over the shared stores, at ``base`` (the gateway's address
    as the client reached it) for a caller at ``source``: ``at`` gives the provider of one request."""

    def __init__(
        self,
        db: asyncpg.Pool,
        settings: Settings,
        clients: ClientDirectory,
        revocations: AppRevocations,
        base: str = "",
        source: str | None = None,
    ) -> None:
        self._db = db
        self._settings = settings
        self._clients = clients
        self._revocations = revocations
        self._base = base
        self._source = source

    @property
    def db(self) -> asyncpg.Pool:
        """The shared store's pool."""
        return self._db

    def at(self, base: str, source: str | None = None) -> AuthorizationProvider:
        """This provider for a request that reached the gateway at ``base`` from client address ``source``."""
        return AuthorizationProvider(self._db, self._settings, self._clients, self._revocations, base, source)

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        """A registered client, or the one a Client ID Metadata Document describes."""
        return await self._clients.get(client_id)

    def needs_fetch(self, client_id: str) -> bool:
        """Whether finding ``client_id`` would fetch its Client ID Metadata Document."""
        return self._clients.needs_fetch(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        """Keep a dynamically registered client with the address it registered from
        (``RegistrationError`` for unusable redirect URIs)."""
        try:
            await self._clients.register(client_info, self._source)
        except ValueError as exc:
            raise RegistrationError("invalid_redirect_uri", str(exc)) from exc

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """Park the request (it names one of this gateway's endpoints, ``/mcp`` when it names none)
        and send the browser to the console's consent page."""
        base = self._base
        resource = params.resource or f"{base}{MCP_PATH}"
        if resource_path(resource, base) is None:
            raise AuthorizeError("invalid_target", f"Not an MCP endpoint of this gateway: {resource}")
        scopes = [s for s in (params.scopes or [SCOPE]) if s]
        if any(s not in (SCOPE, OFFLINE_SCOPE) for s in scopes):
            raise AuthorizeError("invalid_scope", f"Scopes of this gateway: {SCOPE}, {OFFLINE_SCOPE}")
        if SCOPE not in scopes:
            scopes.insert(0, SCOPE)
        request_id = secrets.token_urlsafe(32)
        await store.save_request(
            self._db,
            request_id,
            client.client_id,
            client.client_name,
            base,
            {
                "state": params.state,
                "scopes": scopes,
                "code_challenge": params.code_challenge,
                "redirect_uri": str(params.redirect_uri),
                "redirect_uri_provided_explicitly": params.redirect_uri_provided_explicitly,
                "resource": resource,
                "client_uri": str(client.client_uri) if client.client_uri else None,
            },
            _at(self._settings.oauth_consent_seconds),
        )
        return f"{base}{CONSENT_PAGE}{request_id}"

    async def issue_code(self, client_id: str, consenter: store.Consenter, params: dict[str, Any]) -> str:
        """A single-use code for what the person allowed."""
        code = secrets.token_urlsafe(32)
        await store.save_code(self._db, hash_token(code), client_id, consenter, params, _at(CODE_SECONDS))
        return code

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> GatewayCode | None:
        """The code, used or not (a used one is refused, and revokes its grant, on exchange)."""
        row = await store.code(self._db, hash_token(authorization_code), client.client_id)
        if row is None:
            return None
        params = json.loads(row["params"])
        consenter = store.Consenter(row["key_id"], row["identity"])
        return GatewayCode(
            code=authorization_code,
            scopes=params["scopes"],
            expires_at=float(row["expires_at"]),
            client_id=client.client_id,
            code_challenge=params["code_challenge"],
            redirect_uri=params["redirect_uri"],
            redirect_uri_provided_explicitly=params["redirect_uri_provided_explicitly"],
            resource=params["resource"],
            subject=consenter.principal_id,
            key_id=consenter.key_id,
            identity=consenter.identity,
            grant_id=row["grant_id"],
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: GatewayCode
    ) -> OAuthToken:
        """Tokens for a code's first use; a second use revokes what the first gave."""
        if authorization_code.grant_id is not None:
            await self._revocations.revoke(authorization_code.grant_id, actor=None, reason="code replayed")
            raise TokenError("invalid_grant", "authorization code was already used")
        grant_id = str(uuid.uuid4())
        access, refresh = _new(ACCESS_PREFIX), _new(REFRESH_PREFIX)
        redeemed = await store.redeem_code(
            self._db,
            hash_token(authorization_code.code),
            {
                "grant_id": grant_id,
                "consenter": authorization_code.consenter,
                "client_id": client.client_id,
                "client_name": client.client_name,
                "resource": authorization_code.resource,
                "scopes": authorization_code.scopes,
                **self._token_rows(access, refresh),
            },
        )
        if not redeemed:  # a concurrent exchange of the same code won: a replay all the same
            used = await store.code(self._db, hash_token(authorization_code.code), client.client_id)
            if used is not None and used["grant_id"] is not None:
                await self._revocations.revoke(used["grant_id"], actor=None, reason="code replayed")
            raise TokenError("invalid_grant", "authorization code was already used or has expired")
        await self._revocations.connected(grant_id)
        return self._answer(access, refresh, authorization_code.scopes)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> GatewayRefreshToken | None:
        """The grant of a current refresh token; a rotated one presented again revokes its grant."""
        digest = hash_token(refresh_token)
        row = await store.grant_by_refresh(self._db, digest, client.client_id)
        if row is None:
            stolen = await store.grant_by_rotated_refresh(self._db, digest)
            if stolen is not None:
                await self._revocations.revoke(stolen, actor=None, reason="refresh token replayed")
            return None
        return GatewayRefreshToken(
            token=refresh_token,
            client_id=client.client_id,
            scopes=list(row["scopes"]),
            expires_at=int(row["refresh_expires_at"].timestamp()),
            resource=row["resource"],
            subject=row["key_id"],
            grant_id=row["grant_id"],
            key_id=row["key_id"],
            consent_ends=row["created_at"] + self._refresh_lifetime if row["is_person"] else None,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: GatewayRefreshToken, scopes: list[str]
    ) -> OAuthToken:
        """New access and refresh tokens; the old refresh token stops working."""
        access, refresh = _new(ACCESS_PREFIX), _new(REFRESH_PREFIX)
        rotated = await store.rotate(
            self._db,
            refresh_token.grant_id,
            hash_token(refresh_token.token),
            self._token_rows(access, refresh, refresh_token.consent_ends),
            self._settings.oauth_refresh_token_seconds,
        )
        if not rotated:  # a concurrent refresh with the same token won: a replay all the same
            await self._revocations.revoke(refresh_token.grant_id, actor=None, reason="refresh token replayed")
            raise TokenError("invalid_grant", "refresh token was already used")
        return self._answer(access, refresh, scopes)

    async def load_access_token(self, token: str) -> GatewayAccessToken | None:
        """An unexpired access token (for revocation; requests are checked by the authenticator)."""
        row = await store.grant_by_access(self._db, hash_token(token))
        if row is None:
            return None
        return GatewayAccessToken(
            token=token,
            client_id=row["client_id"],
            scopes=list(row["scopes"]),
            expires_at=int(row["access_expires_at"].timestamp()),
            resource=row["resource"],
            subject=row["key_id"],
            grant_id=row["grant_id"],
        )

    async def revoke_token(self, token: GatewayAccessToken | GatewayRefreshToken) -> None:
        """RFC 7009: revoking either token ends the whole grant (both tokens)."""
        await self._revocations.revoke(token.grant_id, actor=None, reason="revoked by the client")

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: Any) -> OAuthToken:
        """Not offered (the metadata does not advertise the jwt-bearer grant)."""
        raise TokenError("unsupported_grant_type", "The JWT bearer grant is not supported")

    @property
    def _refresh_lifetime(self) -> timedelta:
        return timedelta(seconds=self._settings.oauth_refresh_token_seconds)

    def _token_rows(self, access: str, refresh: str, ends: datetime | None = None) -> dict[str, Any]:
        refresh_until = _at(self._settings.oauth_refresh_token_seconds)
        return {
            "access_hash": hash_token(access),
            "access_expires_at": min(_at(self._settings.oauth_access_token_seconds), ends or refresh_until),
            "refresh_hash": hash_token(refresh),
            "refresh_expires_at": min(refresh_until, ends or refresh_until),
        }

    def _answer(self, access: str, refresh: str, scopes: list[str]) -> OAuthToken:
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self._settings.oauth_access_token_seconds,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )
