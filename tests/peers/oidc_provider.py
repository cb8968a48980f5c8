"""An OpenID Connect identity provider for tests (127.0.0.1 only).

    python tests/peers/oidc_provider.py --port N --client-id ID --client-secret S --redirect-uri URI [--user NAME]
        [--issuer-slash]

The "upstream identity provider" a person signs in with: discovery at
``/.well-known/openid-configuration`` (issuer ``http://127.0.0.1:N``; ``--issuer-slash``: with a trailing
``/``, as some providers name themselves), its RSA signing key (made at
start, ``kid`` set) at ``/jwks``, the authorization code flow with PKCE (S256 only) for the one
confidential client of the flags (its one redirect URI, matched exactly; ``client_secret_basic`` or
``client_secret_post``), and ``/userinfo`` for the access token. ``/authorize`` shows nothing: it
answers 302 to the redirect URI with ``code``, ``state`` and ``iss`` at once, for whoever is signed in
(``--user``, default ``alice``; ``POST /control/login {"user": NAME}`` signs in another of ``USERS``).
An unknown client or redirect URI gets a 400 JSON answer (never a redirect); any other bad parameter a
redirect with ``error``. ``/token`` takes each code once and answers an access token and an RS256 ID
token (``iss``, ``sub`` = the user's name, ``aud`` = the client id, ``iat``, ``exp`` 300 s on, the
authorization request's ``nonce``, and the user's claims: ``name``, ``email``, ``toolmesh_role``,
``toolmesh_namespace``). ``POST /control/next`` makes the next ID token only hostile: ``issuer`` and
``audience`` (other values), ``nonce`` (a wrong one), ``"expired": true`` (``exp`` in the past),
``"unsigned_kid": true`` (signed by a key the JWKS lacks, under its own ``kid``), ``"wrong_alg": true``
(ES256 by a key the JWKS lacks, under the ``kid`` of its RSA key), ``claims`` (merged over the rest).
``GET /control/stats`` counts the ``authorize`` and ``token`` requests.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from mcp.server.auth.provider import construct_redirect_uri
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

USERS: dict[str, dict[str, Any]] = {
    name: {
        "name": f"{name.title()} Example",
        "email": f"{name}@example.test",
        "email_verified": True,
        "toolmesh_role": role,
        "toolmesh_namespace": namespace,
    }
    for name, role, namespace in [
        ("alice", "admin", "default"),
        ("bob", "user", "team-b"),
        ("mallory", "owner", "default"),
    ]
}
"""Who can sign in, and the claims of each (``sub`` is the name)."""
ID_TOKEN_SECONDS = 300
ACCESS_SECONDS = 3600
CODE_SECONDS = 60
KNOBS = frozenset({"issuer", "audience", "nonce", "expired", "unsigned_kid", "wrong_alg", "claims"})
"""What ``POST /control/next`` takes."""


@dataclass
class Grant:
    """What an authorization code stands for."""

    user: str
    scope: str
    redirect_uri: str
    challenge: str
    nonce: str | None
    expires_at: float


class Provider:
    """The identity provider's state: its keys, one client, the signed-in user, codes and tokens."""

    def __init__(self, issuer: str, client_id: str, client_secret: str, redirect_uri: str, user: str) -> None:
        self.issuer = issuer
        self.client_id, self.client_secret, self.redirect_uri = client_id, client_secret, redirect_uri
        self.user = user
        self.key, self.kid = rsa.generate_private_key(public_exponent=65537, key_size=2048), secrets.token_hex(8)
        self.stray = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.codes: dict[str, Grant] = {}
        self.access: dict[str, str] = {}
        self.knobs: dict[str, Any] = {}
        self.stats = {"authorize": 0, "token": 0}

    def jwks(self) -> dict[str, Any]:
        """The public signing key as a JWK Set."""
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [public | {"kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def id_token(self, grant: Grant) -> str:
        """The ID token for ``grant``, spoiled as the pending knobs say (then forgotten)."""
        knobs, self.knobs = self.knobs, {}
        now = int(time.time()) - (2 * ID_TOKEN_SECONDS if knobs.get("expired") else 0)
        claims: dict[str, Any] = {
            "iss": knobs.get("issuer", self.issuer),
            "sub": grant.user,
            "aud": knobs.get("audience", self.client_id),
            "iat": now,
            "exp": now + ID_TOKEN_SECONDS,
            **USERS[grant.user],
        }
        if grant.nonce is not None or "nonce" in knobs:
            claims["nonce"] = knobs.get("nonce", grant.nonce)
        claims |= knobs.get("claims", {})
        if knobs.get("unsigned_kid"):
            return jwt.encode(claims, self.stray, "RS256", headers={"kid": f"stray-{secrets.token_hex(4)}"})
        if knobs.get("wrong_alg"):
            return jwt.encode(claims, ec.generate_private_key(ec.SECP256R1()), "ES256", headers={"kid": self.kid})
        return jwt.encode(claims, self.key, "RS256", headers={"kid": self.kid})

    def authenticated(self, request: Request, form: dict[str, str]) -> bool:
        """Whether the request carries this client's credentials (HTTP Basic or in the form)."""
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            try:
                decoded = base64.b64decode(header.removeprefix("Basic "), validate=True).decode()
            except ValueError:
                return False
            client_id, _, secret = decoded.partition(":")
            client_id, secret = unquote_plus(client_id), unquote_plus(secret)
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        return client_id == self.client_id and hmac.compare_digest(secret.encode(), self.client_secret.encode())


def oauth_error(error: str, description: str, status: int = 400, headers: dict[str, str] | None = None) -> Response:
    """An OAuth error body."""
    body = {"error": error, "error_description": description}
    return JSONResponse(body, status, {"Cache-Control": "no-store", **(headers or {})})


def build(provider: Provider) -> Starlette:
    """The app serving ``provider``."""
    issuer = provider.issuer
    home = issuer.rstrip("/")

    async def discovery(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "issuer": issuer,
                "authorization_endpoint": f"{home}/authorize",
                "token_endpoint": f"{home}/token",
                "jwks_uri": f"{home}/jwks",
                "userinfo_endpoint": f"{home}/userinfo",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code"],
                "code_challenge_methods_supported": ["S256"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "subject_types_supported": ["public"],
                "scopes_supported": ["openid", "profile", "email"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "claims_supported": ["sub", "name", "email", "toolmesh_role", "toolmesh_namespace"],
            }
        )

    async def jwks(request: Request) -> JSONResponse:
        return JSONResponse(provider.jwks())

    async def authorize(request: Request) -> Response:
        provider.stats["authorize"] += 1
        asked = request.query_params
        if asked.get("client_id") != provider.client_id:
            return oauth_error("invalid_client", "unknown client_id")
        if asked.get("redirect_uri") != provider.redirect_uri:
            return oauth_error("invalid_request", "redirect_uri is not the one registered")

        def back(**params: str) -> Response:
            location = construct_redirect_uri(provider.redirect_uri, **params, state=asked.get("state"), iss=issuer)
            return RedirectResponse(location, 302)

        if asked.get("response_type") != "code":
            return back(error="unsupported_response_type", error_description="only code")
        if "openid" not in asked.get("scope", "").split():
            return back(error="invalid_scope", error_description="scope must contain openid")
        if not asked.get("code_challenge") or asked.get("code_challenge_method") != "S256":
            return back(error="invalid_request", error_description="PKCE with S256 is required")
        code = secrets.token_urlsafe(24)
        provider.codes[code] = Grant(
            provider.user,
            asked["scope"],
            asked["redirect_uri"],
            asked["code_challenge"],
            asked.get("nonce"),
            time.time() + CODE_SECONDS,
        )
        return back(code=code)

    async def token(request: Request) -> Response:
        provider.stats["token"] += 1
        form = {key: str(value) for key, value in (await request.form()).items()}
        if not provider.authenticated(request, form):
            return oauth_error("invalid_client", "client authentication failed", 401, {"WWW-Authenticate": "Basic"})
        if form.get("grant_type") != "authorization_code":
            return oauth_error("unsupported_grant_type", "only authorization_code")
        grant = provider.codes.pop(form.get("code", ""), None)
        if grant is None or grant.expires_at < time.time():
            return oauth_error("invalid_grant", "unknown, used or expired code")
        if form.get("redirect_uri") != grant.redirect_uri:
            return oauth_error("invalid_grant", "redirect_uri differs from the authorization request's")
        verifier = form.get("code_verifier", "").encode()
        computed = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
        if not verifier or not hmac.compare_digest(computed, grant.challenge):
            return oauth_error("invalid_grant", "code_verifier does not match the code_challenge")
        access = secrets.token_urlsafe(24)
        provider.access[access] = grant.user
        answer = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": ACCESS_SECONDS,
            "id_token": provider.id_token(grant),
            "scope": grant.scope,
        }
        return JSONResponse(answer, headers={"Cache-Control": "no-store"})

    async def userinfo(request: Request) -> Response:
        user = provider.access.get(request.headers.get("authorization", "").removeprefix("Bearer "))
        if user is None:
            return JSONResponse({"error": "invalid_token"}, 401, {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return JSONResponse({"sub": user, **USERS[user]})

    async def login(request: Request) -> JSONResponse:
        user = str((await request.json()).get("user"))
        if user not in USERS:
            return JSONResponse({"error": f"unknown user {user!r}", "users": sorted(USERS)}, 400)
        provider.user = user
        return JSONResponse({"user": user})

    async def next_token(request: Request) -> JSONResponse:
        knobs = await request.json()
        if not isinstance(knobs, dict) or not knobs.keys() <= KNOBS or not isinstance(knobs.get("claims", {}), dict):
            return JSONResponse({"error": "unknown knobs", "knobs": sorted(KNOBS)}, 400)
        provider.knobs = knobs
        return JSONResponse({"next": knobs})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(provider.stats)

    return Starlette(
        routes=[
            Route("/.well-known/openid-configuration", discovery, methods=["GET"]),
            Route("/jwks", jwks, methods=["GET"]),
            Route("/authorize", authorize, methods=["GET"]),
            Route("/token", token, methods=["POST"]),
            Route("/userinfo", userinfo, methods=["GET"]),
            Route("/control/login", login, methods=["POST"]),
            Route("/control/next", next_token, methods=["POST"]),
            Route("/control/stats", stats, methods=["GET"]),
        ]
    )


def main() -> None:
    """Serve until stopped."""
    parser = argparse.ArgumentParser(description="An OpenID Connect identity provider for tests")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    parser.add_argument("--redirect-uri", required=True)
    parser.add_argument("--user", choices=sorted(USERS), default="alice")
    parser.add_argument("--issuer-slash", action="store_true", help="name the issuer with a trailing /")
    args = parser.parse_args()
    issuer = f"http://127.0.0.1:{args.port}" + ("/" if args.issuer_slash else "")
    provider = Provider(issuer, args.client_id, args.client_secret, args.redirect_uri, args.user)
    uvicorn.run(build(provider), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
