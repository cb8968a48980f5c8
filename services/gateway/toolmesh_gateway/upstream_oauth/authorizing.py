"""Authorizing an upstream: the authorization URL (shared identity: for an owner or admin, and the
grant is every caller's; per-user identity: for any caller who sees the server, and the grant is its
own), and the callback that turns the code into sealed tokens, says so in an event and connects the
server if it was waiting for one."""

from __future__ import annotations

import logging
import secrets
from urllib.parse import urlencode

import httpx2
from mcp.client.auth import PKCEParameters
from mcp.client.auth.utils import issuers_match, union_scopes

from toolmesh.contracts.events import ServerAuthorized
from toolmesh.contracts.openapi_config import DOCUMENT_MAX_BYTES as OPENAPI_DOCUMENT_MAX_BYTES
from toolmesh.contracts.upstream_auth import AuthorizationState, AuthorizeResponse, UpstreamAuth, upstream_auth
from toolmesh.credentials import CredentialBox
from toolmesh.egress.bounded import DOCUMENT_MAX_BYTES, bounded_client
from toolmesh.egress.policy import EgressPolicy
from toolmesh.errors import (
    Forbidden,
    ServerConnectionFailed,
    ServerNotFound,
    ToolmeshError,
    UpstreamAuthorizationRequired,
    ValidationFailed,
)
from toolmesh.oauth_tokens import TokenRequestFailed, granted, request_token, usable_scope
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.runtime import Backends
from toolmesh.platform.store import principals, queries
from toolmesh.platform.store.consistency import wait_for_projection
from toolmesh.platform.store.upstream_tokens import SHARED_IDENTITY, UpstreamGrant, grant_record, save_grant
from toolmesh.redaction import process_redactor
from toolmesh_gateway.auth import JWT_PRINCIPAL_PREFIX, Caller
from toolmesh_gateway.server_commands import ServerCommands
from toolmesh_gateway.upstream_oauth.client_urls import callback_url, document_url
from toolmesh_gateway.upstream_oauth.discovery import AuthorizationServer, discover
from toolmesh_gateway.upstream_oauth.exchange import exchanged
from toolmesh_gateway.upstream_oauth.flows import FLOW_TTL_SECONDS, FlowStore, PendingFlow
from toolmesh_gateway.upstream_oauth.openapi_discovery import discover_openapi
from toolmesh_gateway.upstream_oauth.registration import RegisteredClients, client_for

log = logging.getLogger("toolmesh.gateway")
OAUTH_LIMITS = httpx2.Limits(max_connections=10, max_keepalive_connections=0)
OAUTH_TIMEOUT = httpx2.Timeout(15.0)


def _refused(words: str) -> ValidationFailed:
    return ValidationFailed(f"Authorization refused: {words}", {"step": "callback"})


class UpstreamAuthorizations:
    """Starts and finishes the authorizations of servers registered with ``auth.mode: oauth``."""

    def __init__(self, backends: Backends, box: CredentialBox, flows: FlowStore, commands: ServerCommands) -> None:
        self._b = backends
        self._box = box
        self._flows = flows
        self._commands = commands
        self._registered = RegisteredClients()

    def _policy(self, row: queries.Row) -> EgressPolicy:
        private = bool(row["connection_config"].get("private_network"))
        return EgressPolicy.of(private, self._b.settings.upstream_private_networks)

    def _client(self, row: queries.Row) -> httpx2.AsyncClient:
        """A client that reaches only what the server's egress policy allows, following no redirect and
        reading no answer past ``DOCUMENT_MAX_BYTES`` (an OpenAPI server's: past its document's bound)."""
        bound = OPENAPI_DOCUMENT_MAX_BYTES if row["transport_type"] == "OPENAPI" else DOCUMENT_MAX_BYTES
        return bounded_client(self._policy(row), OAUTH_LIMITS, bound, timeout=OAUTH_TIMEOUT, follow_redirects=False)

    async def _discover(
        self, client: httpx2.AsyncClient, row: queries.Row, url: str, auth: UpstreamAuth
    ) -> AuthorizationServer:
        """The server's authorization server: from its OpenAPI document's security scheme for an
        OPENAPI server, else from its challenge and metadata."""
        if row["transport_type"] == "OPENAPI":
            config = self._box.open(row["connection_config"]["sealed"])
            return await discover_openapi(client, self._policy(row), config, auth)
        return await discover(client, url, transport=row["transport_type"], scopes=auth.scopes)

    def _oauth_config(self, row: queries.Row) -> tuple[str, UpstreamAuth]:
        config = self._box.open(row["connection_config"]["sealed"])
        auth = upstream_auth(config)
        if auth is None:
            raise ValidationFailed(
                "Server is not registered with OAuth: its connection_config has no auth with mode 'oauth'",
                {"server_id": row["id"]},
            )
        return str(config.get("base_url") or config.get("url")), auth

    async def start(self, server_id: str, caller: Caller) -> AuthorizeResponse:
        """The authorization URL of ``server_id``: for a shared identity only an owner or admin of its
        namespace may ask (403 otherwise); for a per-user one any caller who sees the server, for itself
        (a JWT caller of a server registered with ``auth.token_exchange`` is authorized at once instead,
        by exchanging its token: no URL). The scope asked for includes the one an upstream's
        insufficient_scope challenge wanted for this grant (``want_scope``), as the same client (a new
        client id would be another principal to the upstream, which may bind its sessions to one)."""
        row = await self._commands.server(server_id, caller)
        url, auth = self._oauth_config(row)
        per_user = auth.identity == "per_user"
        if not per_user:
            caller.principal.require_manager("authorize servers")
        if per_user and auth.token_exchange is not None and caller.principal.token is not None:
            await self._exchange_token(row, url, auth, caller, caller.principal.token)
            return AuthorizeResponse(
                server_id=server_id, identity=auth.identity, authorized=True, authorization_url=None, expires_in=0
            )
        redirect_uri = callback_url(self._b.settings.public_url, caller.origin)
        async with self._client(row) as client:
            found = await self._discover(client, row, url, auth)
            scope = await self._scope(server_id, caller, per_user, found.scope)
            document = document_url(self._b.settings.public_url)
            registered = await client_for(
                client, auth, found.metadata, redirect_uri, found.scope, self._registered, document, server_id=server_id
            )
        pkce = PKCEParameters.generate()  # RFC 7636: a code verifier and its S256 challenge
        state = secrets.token_urlsafe(32)
        flow = PendingFlow(
            server_id=server_id,
            namespace=row["namespace"],
            actor=caller.actor,
            redirect_uri=redirect_uri,
            code_verifier=pkce.code_verifier,
            issuer=found.issuer,
            iss_required=bool(found.metadata.authorization_response_iss_parameter_supported),
            token_endpoint=str(found.metadata.token_endpoint),
            client_id=registered.client_id,
            client_secret=registered.client_secret,
            auth_method=registered.auth_method,
            resource=found.resource,
            scope=scope,
            principal=caller.principal.key_id if per_user else SHARED_IDENTITY,
        )
        await self._flows.put(state, flow)
        query = {
            "response_type": "code",
            "client_id": registered.client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": pkce.code_challenge,
            "code_challenge_method": "S256",
            "resource": found.resource,
            **({"scope": scope} if scope else {}),
        }
        endpoint = str(found.metadata.authorization_endpoint)
        joined = f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}"
        log.info("authorization started", extra={"server": row["name"], "server_id": server_id})
        return AuthorizeResponse(
            server_id=server_id,
            identity=auth.identity,
            authorization_url=joined,
            expires_in=int(FLOW_TTL_SECONDS),
        )

    async def _scope(self, server_id: str, caller: Caller, per_user: bool, found: str | None) -> str | None:
        """``found`` with the scope a challenge wanted for the grant this authorization replaces (a step-up)."""
        stored = await grant_record(self._b.db, server_id, caller.principal.key_id if per_user else SHARED_IDENTITY)
        wanted = stored["wanted_scope"] if stored is not None else None
        return usable_scope(union_scopes(found, wanted)) or found

    async def state(self, server_id: str, caller: Caller) -> AuthorizationState:
        """Whether ``server_id`` holds a grant for ``caller`` (per-user) or for every caller (shared)."""
        row = await self._commands.server(server_id, caller)
        _url, auth = self._oauth_config(row)
        principal = caller.principal.key_id if auth.identity == "per_user" else SHARED_IDENTITY
        stored = await grant_record(self._b.db, server_id, principal)
        return AuthorizationState(
            server_id=server_id,
            identity=auth.identity,
            authorized=stored is not None,
            issuer=stored["issuer"] if stored is not None else None,
            authorized_at=stored["updated_at"] if stored is not None else None,
        )

    async def exchange(self, needed: UpstreamAuthorizationRequired, caller: Caller) -> bool:
        """Whether ``caller``'s own token was exchanged for its grant at the server ``needed`` names
        (a JWT caller of a server registered with ``auth.token_exchange``; a failure is logged)."""
        token = caller.principal.token
        if token is None:
            return False
        try:
            row = await self._commands.server(str(needed.context.get("server_id", "")), caller)
            url, auth = self._oauth_config(row)
            if auth.identity != "per_user" or auth.token_exchange is None:
                return False
            await self._exchange_token(row, url, auth, caller, token)
        except ToolmeshError as exc:
            where = {"server_id": needed.context.get("server_id")}
            log.warning("token exchange for a caller failed: %s", exc.detail, extra=where)
            return False
        return True

    async def _exchange_token(self, row: queries.Row, url: str, auth: UpstreamAuth, caller: Caller, token: str) -> None:
        """Exchange ``token`` for ``caller``'s grant, asking for the scope a challenge wanted for the grant
        it replaces as a browser authorization would (else a step-up never gets the wider scope)."""
        async with self._client(row) as client:
            found = await self._discover(client, row, url, auth)
            scope = await self._scope(row["id"], caller, True, found.scope)
            grant = await exchanged(client, found, auth, token, scope)
        await self._keep(row, grant, caller.principal.key_id, caller.actor)

    async def link(self, needed: UpstreamAuthorizationRequired, caller: Caller) -> UpstreamAuthorizationRequired:
        """``needed`` with the URL at which ``caller`` authorizes (``authorization_url``,
        ``expires_in``); when no authorization could be started, with why (a JWT caller whose token
        exchange was refused has no URL to open, and its ``authorize`` would be refused the same way)."""
        server_id = str(needed.context.get("server_id", ""))
        try:
            started = await self.start(server_id, caller)
        except ToolmeshError as exc:
            log.warning("could not start an authorization for a caller: %s", exc.detail, extra={"server_id": server_id})
            if isinstance(exc, Forbidden):  # a shared server's: ``needed`` names who authorizes it
                return needed
            why = f"{needed.detail} (which failed just now: {exc.detail})"
            return UpstreamAuthorizationRequired(why, needed.context)
        return UpstreamAuthorizationRequired(
            needed.detail,
            needed.context,
            authorization_url=started.authorization_url,
            expires_in=started.expires_in,
        )

    async def finish(self, code: str, state: str, iss: str | None) -> str:
        """Exchange the code of an authorization that came back; the server's name.

        Raises:
            ValidationFailed: an unknown, expired or used ``state``, or an ``iss`` that is not the issuer's.
            ServerConnectionFailed: the token endpoint refused the code.
        """
        flow = await self._flows.take(state)
        if flow is None:
            raise _refused("unknown, expired or already used state")
        if iss is not None and not issuers_match(iss, flow.issuer):
            raise _refused("the answer names another issuer (RFC 9207)")
        if iss is None and flow.iss_required:
            raise _refused("the answer lacks the issuer its authorization server promised (RFC 9207)")
        if not await self._principal_kept(flow.principal):
            raise _refused("the key that started it was revoked since")
        row = await self._row(flow.server_id)
        grant = await self._redeem_code(row, flow, code)
        await self._keep(row, grant, flow.principal, flow.actor)
        return str(row["name"])

    async def _keep(self, row: queries.Row, grant: UpstreamGrant, principal: str, actor: str) -> None:
        """Store ``grant`` sealed for ``principal``, say so in an event and connect the server if it
        was waiting for a grant; ``ServerNotFound`` when the server was removed meanwhile. The gateway
        never uses the tokens again: they are retired from the log redactor at once (masked a while,
        then forgotten), and so is a client secret the authorization server registered (each
        authorization may bring a new one), so authorizations repeated for ever do not grow it without
        end; the config's own ``auth.client_secret`` stays."""
        redactor = process_redactor()
        redactor.add(grant.secrets())
        configured = self._oauth_config(row)[1].client_secret
        try:
            if not await save_grant(self._b.db, self._box, row["id"], grant, principal):
                raise ServerNotFound(f"Server not found: {row['id']} (removed while it was being authorized)")
        finally:
            redactor.retire(secret for secret in grant.secrets() if configured is None or secret.value != configured)
        seq = await publish_event(
            self._b.js,
            ServerAuthorized(
                server_id=row["id"],
                namespace=row["namespace"],
                actor=actor,
                issuer=grant.issuer,
                identity="shared" if principal == SHARED_IDENTITY else "per_user",
                scope=grant.scope,
            ),
        )
        # The status as of this event: an ERROR the session-worker published before it is seen here
        # (one published after it, the worker itself follows up: it reads the grant after its ERROR).
        await wait_for_projection(self._b.db, seq, self._b.settings.projection_wait_seconds)
        await self._commands.connect_authorized(row["id"], actor)
        log.info("authorized", extra={"server": row["name"], "server_id": row["id"]})

    async def _principal_kept(self, principal: str) -> bool:
        """Whether the principal a grant is for may still have one: the shared identity and JWT
        callers always; an API key unless it was revoked (which dropped its grants)."""
        if principal == SHARED_IDENTITY or principal.startswith(JWT_PRINCIPAL_PREFIX):
            return True
        return await principals.key_exists(self._b.db, principal)

    async def _row(self, server_id: str) -> queries.Row:
        row = await queries.get_server(self._b.db, server_id)
        if row is None:
            raise ServerNotFound(f"Server not found: {server_id}", {"server_id": server_id})
        return row

    async def _redeem_code(self, row: queries.Row, flow: PendingFlow, code: str) -> UpstreamGrant:
        """The grant the token endpoint gives for the authorization's ``code`` (with its PKCE verifier)."""
        pending = UpstreamGrant(
            issuer=flow.issuer,
            token_endpoint=flow.token_endpoint,
            access_token="",
            client_id=flow.client_id,
            auth_method=flow.auth_method,
            client_secret=flow.client_secret,
            resource=flow.resource,
            scope=flow.scope,
        )
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": flow.redirect_uri,
            "code_verifier": flow.code_verifier,
        }
        try:
            async with self._client(row) as client:
                return granted(pending, await request_token(client, pending, form))
        except TokenRequestFailed as exc:
            raise ServerConnectionFailed(f"Authorization failed: {exc.summary}", {"step": "token"}) from None
