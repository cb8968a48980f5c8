"""The authorization server's HTTP surface: RFC 8414 metadata, RFC 9728 protected-resource metadata
of every MCP endpoint, the SDK's ``/authorize``, ``/token`` and ``/register`` (RFC 7591) handlers
(``/authorize`` and ``/register`` limited per client address and in size), ``/revoke`` (RFC 7009),
and the consent page's sign-in at the identity provider when one is configured (``sign_in``), over
``AuthorizationProvider``. The issuer is ``TOOLMESH_PUBLIC_URL``, else the address the request reached."""

from __future__ import annotations

from typing import Any

from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.routes import build_metadata
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from pydantic import AnyHttpUrl
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, request_response
from starlette.types import ASGIApp

from toolmesh.errors import RateLimited
from toolmesh.platform.config import Settings
from toolmesh_gateway.authorization_server.addresses import (
    AUTHORIZATION_SERVER_METADATA_PATH,
    MCP_PATH,
    OFFLINE_SCOPE,
    RESOURCE_METADATA_PATH,
    SCOPE,
    base_url,
    endpoint_path,
)
from toolmesh_gateway.authorization_server.identity_provider import IdentityProvider
from toolmesh_gateway.authorization_server.provider import AuthorizationProvider
from toolmesh_gateway.authorization_server.sign_in import SignInRoutes
from toolmesh_gateway.rate_limit import RateLimiter

CLIENT_AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic"]
REGISTRATION_MAX_BYTES = 16 * 1024
"""A registration (RFC 7591) larger than this is refused: client metadata is a few hundred bytes, and
each registration is a row kept in Postgres."""
AUTHORIZATION_MAX_BYTES = 8 * 1024
"""An authorization request (query and form together) larger than this is refused: its ``state`` and
PKCE challenge are kept in Postgres until the person decides, and a client needs a few hundred bytes."""
_REGISTRATION = ClientRegistrationOptions(
    enabled=True, valid_scopes=[SCOPE, OFFLINE_SCOPE], default_scopes=[SCOPE, OFFLINE_SCOPE]
)
"""A client that registers naming no scope may ask for both later (``offline_access`` included)."""
_NO_STORE = {"Cache-Control": "no-store"}


def server_metadata(base: str) -> dict[str, Any]:
    """RFC 8414 metadata of the authorization server whose issuer is ``base``."""
    metadata = build_metadata(AnyHttpUrl(base), None, _REGISTRATION, RevocationOptions(enabled=True))
    document: dict[str, Any] = metadata.model_dump(mode="json", exclude_none=True)
    document |= {
        "issuer": base,
        "token_endpoint_auth_methods_supported": CLIENT_AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": CLIENT_AUTH_METHODS,
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }
    return document


def resource_metadata(base: str, endpoint: str, settings: Settings) -> dict[str, Any]:
    """RFC 9728 metadata of one MCP endpoint: the built-in authorization server (when on) and the
    identity provider whose JWTs the gateway accepts (when one is configured)."""
    servers = [base] if settings.oauth_server else []
    if settings.jwt_issuer:
        servers.append(settings.jwt_issuer)
    return {
        "resource": f"{base}{endpoint}",
        "authorization_servers": servers,
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": f"toolmesh {endpoint}",
    }


def _cors(app: ASGIApp, methods: list[str]) -> ASGIApp:
    return CORSMiddleware(app, allow_origins="*", allow_methods=methods, allow_headers=["mcp-protocol-version"])


class AuthorizationRoutes:
    """The routes, over one provider and the registration limit of this gateway."""

    def __init__(
        self, provider: AuthorizationProvider, settings: Settings, identity_provider: IdentityProvider | None = None
    ) -> None:
        self._provider = provider
        self._settings = settings
        self._clients = ClientAuthenticator(provider)
        self._registrations = RateLimiter(settings.oauth_registrations_per_minute / 60.0, 5)
        self._authorizations = RateLimiter(settings.oauth_authorizations_per_minute / 60.0, 20)
        self._sign_in = (
            SignInRoutes(identity_provider, provider.db, settings, self._authorizations)
            if identity_provider is not None
            else None
        )

    def routes(self) -> list[BaseRoute]:
        """Metadata always; the authorization server's endpoints when it is on."""
        found: list[BaseRoute] = [
            Route(
                RESOURCE_METADATA_PATH + "{path:path}",
                _cors(request_response(self._resource_metadata), ["GET", "OPTIONS"]),
                methods=["GET", "OPTIONS"],
            ),
        ]
        if not self._settings.oauth_server:
            return found
        return [
            *found,
            Route(
                AUTHORIZATION_SERVER_METADATA_PATH,
                _cors(request_response(self._server_metadata), ["GET", "OPTIONS"]),
                methods=["GET", "OPTIONS"],
            ),
            Route("/authorize", self._authorize, methods=["GET", "POST"]),
            Route("/token", _cors(request_response(self._token), ["POST", "OPTIONS"]), methods=["POST", "OPTIONS"]),
            Route(
                "/register", _cors(request_response(self._register), ["POST", "OPTIONS"]), methods=["POST", "OPTIONS"]
            ),
            Route("/revoke", _cors(request_response(self._revoke), ["POST", "OPTIONS"]), methods=["POST", "OPTIONS"]),
            *(self._sign_in.routes() if self._sign_in is not None else []),
        ]

    async def _server_metadata(self, request: Request) -> Response:
        return JSONResponse(server_metadata(base_url(self._settings, request)))

    async def _resource_metadata(self, request: Request) -> Response:
        path = request.path_params.get("path", "") or MCP_PATH
        endpoint = endpoint_path(path if path.startswith("/") else f"/{path}")
        if endpoint is None:
            return JSONResponse({"error": "not_found", "error_description": "Not an MCP endpoint"}, status_code=404)
        return JSONResponse(resource_metadata(base_url(self._settings, request), endpoint, self._settings))

    async def _authorize(self, request: Request) -> Response:
        if (refused := _limited(self._authorizations, request)) is not None:
            return refused
        if len(request.url.query) + len(await request.body()) > AUTHORIZATION_MAX_BYTES:
            body = {"error": "invalid_request", "error_description": "Authorization request too large"}
            return JSONResponse(body, status_code=400, headers=_NO_STORE)
        provider = self._provider.at(base_url(self._settings, request))
        return await AuthorizationHandler(provider).handle(request)

    async def _token(self, request: Request) -> Response:
        if (refused := await self._fetch_limited(request)) is not None:
            return refused
        return await TokenHandler(self._provider, self._clients).handle(request)

    async def _register(self, request: Request) -> Response:
        if (refused := _limited(self._registrations, request)) is not None:
            return refused
        if len(await request.body()) > REGISTRATION_MAX_BYTES:
            body = {"error": "invalid_client_metadata", "error_description": "Client metadata too large"}
            return JSONResponse(body, status_code=413, headers=_NO_STORE)
        provider = self._provider.at(base_url(self._settings, request), _address(request))
        return await RegistrationHandler(provider, _REGISTRATION).handle(request)

    async def _revoke(self, request: Request) -> Response:
        """RFC 7009 for every client. (The SDK's handler requires a ``client_secret`` form field,
        which neither a public client nor one authenticating with HTTP Basic sends.)"""
        if (refused := await self._fetch_limited(request)) is not None:
            return refused
        try:
            client = await self._clients.authenticate_request(request)
        except AuthenticationError as exc:
            body = {"error": "invalid_client", "error_description": exc.message}
            return JSONResponse(body, status_code=401, headers=_NO_STORE)
        token = (await request.form()).get("token")
        if not isinstance(token, str) or not token:
            body = {"error": "invalid_request", "error_description": "token is required"}
            return JSONResponse(body, status_code=400, headers=_NO_STORE)
        found = await self._provider.load_access_token(token) or await self._provider.load_refresh_token(client, token)
        if found is not None and found.client_id == client.client_id:
            await self._provider.revoke_token(found)
        return Response(status_code=200, headers=_NO_STORE)  # unknown tokens too (RFC 7009 §2.2)

    async def _fetch_limited(self, request: Request) -> Response | None:
        """A client named by a document URL not cached makes the gateway fetch it: as often per client
        address as ``/authorize`` may be asked (429 ``slow_down`` past that), at ``/token`` and ``/revoke`` too."""
        client_id = (await request.form()).get("client_id")
        if isinstance(client_id, str) and self._provider.needs_fetch(client_id):
            return _limited(self._authorizations, request)
        return None


def _limited(limiter: RateLimiter, request: Request) -> Response | None:
    """429 ``slow_down`` when the client address is past ``limiter``'s rate, else None."""
    try:
        limiter.check(_address(request))
    except RateLimited as exc:
        body = {"error": "slow_down", "error_description": exc.detail}
        return JSONResponse(body, status_code=429, headers={**exc.headers(), **_NO_STORE})
    return None


def _address(request: Request) -> str:
    return request.client.host if request.client else "-"
