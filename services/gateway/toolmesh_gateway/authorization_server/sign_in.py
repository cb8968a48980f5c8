"""Signing in at the identity provider from the consent page: ``GET /oauth/sign-in?request=<id>`` sends
the browser to the provider, ``GET /oauth/sign-in/callback`` takes it back, binds the person the ID
token names to that one waiting request and gives the browser a secret for it: an HttpOnly,
``SameSite=Strict`` cookie sent only to that request's consent API. The sign-in's state, nonce and
PKCE verifier wait in Postgres with the request, so the callback may reach another replica."""

from __future__ import annotations

import secrets
from urllib.parse import quote

import asyncpg
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from toolmesh.credentials import hash_token
from toolmesh.errors import Unauthorized
from toolmesh.platform.config import Settings
from toolmesh_gateway.authorization_server import store
from toolmesh_gateway.authorization_server.addresses import CONSENT_PAGE, base_url
from toolmesh_gateway.authorization_server.identity_provider import IdentityProvider
from toolmesh_gateway.rate_limit import RateLimiter

SIGN_IN_PATH = "/oauth/sign-in"
CALLBACK_PATH = "/oauth/sign-in/callback"
CONSENT_COOKIE = "toolmesh_consent"
REQUESTS_API = "/api/v1/oauth/requests/"
"""The consent API of one request is under this path and its id: the only place its cookie goes."""
_REQUEST_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class SignInRoutes:
    """The two routes, over the identity provider, the shared store and a per-address limit."""

    def __init__(self, provider: IdentityProvider, db: asyncpg.Pool, settings: Settings, limiter: RateLimiter) -> None:
        self._provider = provider
        self._db = db
        self._settings = settings
        self._limiter = limiter

    def routes(self) -> list[BaseRoute]:
        """``/oauth/sign-in`` and its callback."""
        return [
            Route(SIGN_IN_PATH, self._start, methods=["GET"]),
            Route(CALLBACK_PATH, self._callback, methods=["GET"]),
        ]

    async def _start(self, request: Request) -> Response:
        request_id = request.query_params.get("request", "")
        if not (16 <= len(request_id) <= 128 and set(request_id) <= _REQUEST_ID_CHARS):
            return PlainTextResponse("Unknown authorization request", status_code=400)
        self._limiter.check(request.client.host if request.client else "-")
        base = base_url(self._settings, request)
        try:
            sign_in = await self._provider.start(base + CALLBACK_PATH)
        except Unauthorized as exc:
            return _back(base, request_id, exc.detail)
        kept = {"nonce": sign_in.nonce, "verifier": sign_in.verifier}
        if not await store.start_sign_in(self._db, request_id, hash_token(sign_in.state), kept):
            return _back(base, request_id, None)  # the page tells the request is gone
        return RedirectResponse(sign_in.url, status_code=303, headers=_NO_STORE)

    async def _callback(self, request: Request) -> Response:
        base = base_url(self._settings, request)
        state = request.query_params.get("state", "")
        row = await store.take_sign_in(self._db, hash_token(state)) if state else None
        if row is None:
            return PlainTextResponse(
                "This sign-in is unknown, was used already, or its request expired. Start again from the MCP client.",
                status_code=400,
                headers=_NO_STORE,
            )
        request_id = row["request_id"]
        if (error := request.query_params.get("error")) is not None:
            described = request.query_params.get("error_description") or error
            return _back(base, request_id, f"The identity provider refused the sign-in: {described}")
        try:
            identity = await self._provider.finish(
                request.query_params.get("code", ""),
                request.query_params.get("iss"),
                row["sign_in"],
                base + CALLBACK_PATH,
            )
        except Unauthorized as exc:
            return _back(base, request_id, exc.detail)
        secret = secrets.token_urlsafe(32)
        await store.sign_in_as(self._db, request_id, identity, hash_token(secret))
        response = _back(base, request_id, None)
        response.set_cookie(
            CONSENT_COOKIE,
            secret,
            max_age=self._settings.oauth_consent_seconds,
            path=REQUESTS_API + request_id,
            secure=base.startswith("https://"),
            httponly=True,
            samesite="strict",
        )
        return response


_NO_STORE = {"Cache-Control": "no-store"}


def _back(base: str, request_id: str, error: str | None) -> RedirectResponse:
    """To the consent page of the request (with the reason the sign-in failed, when it did)."""
    target = f"{base}{CONSENT_PAGE}{request_id}"
    if error:
        target += f"?sign_in_error={quote(error, safe='')}"
    return RedirectResponse(target, status_code=303, headers=_NO_STORE)
