"""The identity provider a person may sign in with on the consent page instead of pasting an API key:
OpenID Connect's authorization code flow with PKCE (S256) and a nonce, driven with authlib's OAuth 2
client; the ID token's signature (the provider's JWKS), issuer, audience, expiry and nonce checked
with PyJWT, as the JWT bearer support checks tokens. Role and namespace come from the claims that
support reads (``TOOLMESH_JWT_ROLE_CLAIM``, ``TOOLMESH_JWT_NAMESPACE_CLAIM``); an owner is never made.

On when ``TOOLMESH_OIDC_CLIENT_ID`` and ``TOOLMESH_JWT_ISSUER`` are set. The provider is the
operator's choice: its addresses are not held to the egress rules of upstreams."""

from __future__ import annotations

import secrets
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuthError

from toolmesh.egress.http import trusting_context
from toolmesh.errors import Unauthorized
from toolmesh.platform.config import Settings
from toolmesh_gateway.auth import JWT_PRINCIPAL_PREFIX
from toolmesh_gateway.jwt_bearer import identity_of

DISCOVERY_PATH = "/.well-known/openid-configuration"
METADATA_CACHE_SECONDS = 300.0
"""How long the provider's discovery document and keys are used before they are fetched again."""
KEYS_REFETCH_SECONDS = 60.0
"""An ID token signed by a key not in the cached JWKS fetches it again, at most this often."""
HTTP_SECONDS = 10.0
ID_TOKEN_LEEWAY_SECONDS = 60


@dataclass(frozen=True)
class SignIn:
    """A sign-in under way: where to send the browser, and what its return is checked against."""

    url: str
    state: str
    nonce: str
    verifier: str


class IdentityProvider:
    """The configured OpenID Connect provider, its discovery document and keys cached."""

    def __init__(self, settings: Settings, issuer: str, client_id: str) -> None:
        self.issuer = issuer
        """As configured, compared exactly (OpenID Connect; some providers' issuers end with ``/``)."""
        self._settings = settings
        self._client_id = client_id
        self._secret = settings.oidc_client_secret
        self._verify: ssl.SSLContext | bool = (
            trusting_context(str(settings.egress_ca_file)) if settings.egress_ca_file else True
        )
        self._metadata: dict[str, Any] | None = None
        self._metadata_until = 0.0
        self._keys: jwt.PyJWKSet | None = None
        self._keys_at = 0.0

    @classmethod
    def configured(cls, settings: Settings) -> IdentityProvider | None:
        """The provider when sign-in with one is configured, else None."""
        if not (settings.oidc_client_id and settings.jwt_issuer):
            return None
        return cls(settings, settings.jwt_issuer, settings.oidc_client_id)

    @property
    def name(self) -> str:
        """How the consent page names the provider: ``TOOLMESH_OIDC_NAME``, else its issuer's host."""
        return self._settings.oidc_name or urlsplit(self.issuer).netloc

    async def start(self, redirect_uri: str) -> SignIn:
        """A fresh sign-in: the provider's authorization URL with a new state, nonce and PKCE challenge."""
        metadata = await self._discovery()
        state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        verifier = secrets.token_urlsafe(48)
        async with self._client(redirect_uri) as client:
            url, _ = client.create_authorization_url(
                metadata["authorization_endpoint"], state=state, nonce=nonce, code_verifier=verifier
            )
        return SignIn(url=url, state=state, nonce=nonce, verifier=verifier)

    async def finish(self, code: str, issuer: str | None, sign_in: dict[str, str], redirect_uri: str) -> dict[str, str]:
        """The person a completed sign-in names: ``principal_id`` (``jwt:<sub>``), ``name``, ``role`` and
        ``namespace``, from the ID token the code gives; ``Unauthorized`` when anything does not check out."""
        if issuer is not None and issuer != self.issuer:  # RFC 9207: a mix-up
            raise Unauthorized(f"The sign-in came back from {issuer}, not {self.issuer}")
        metadata = await self._discovery()
        async with self._client(redirect_uri) as client:
            try:
                token = await client.fetch_token(
                    metadata["token_endpoint"],
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=sign_in["verifier"],
                )
            except (OAuthError, httpx.HTTPError, ValueError) as exc:
                raise Unauthorized(f"The identity provider did not give a token: {exc}") from exc
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise Unauthorized("The identity provider gave no ID token")
        claims = await self._verified(id_token, sign_in["nonce"])
        subject, role, namespace = identity_of(claims, self._settings)
        name = str(claims["email"]) if claims.get("email") and claims.get("email_verified") is True else subject
        return {
            "principal_id": f"{JWT_PRINCIPAL_PREFIX}{subject}",
            "name": name,
            "role": str(role),
            "namespace": namespace,
            "issuer": self.issuer,
        }

    async def _verified(self, id_token: str, nonce: str) -> dict[str, Any]:
        try:
            key = await self._signing_key(id_token)
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key,
                algorithms=list(self._settings.jwt_algorithms),
                issuer=self.issuer,
                audience=self._client_id,
                leeway=ID_TOKEN_LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "sub", "nonce"]},
            )
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"The identity provider's ID token was refused: {exc}") from exc
        if not secrets.compare_digest(str(claims["nonce"]).encode(), nonce.encode()):  # str: ASCII only
            raise Unauthorized("The identity provider's ID token is for another sign-in (nonce)")
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self._client_id:
            raise Unauthorized("The identity provider's ID token was issued to another client (azp)")
        return claims

    async def _signing_key(self, id_token: str) -> jwt.PyJWK:
        """The JWK the ID token names: as a ``PyJWK``, so the token is verified with that key's own
        algorithm (another ``alg`` in the header is refused, not fed to a key of another kind)."""
        kid = jwt.get_unverified_header(id_token).get("kid")
        keys = await self._key_set(refresh=False)
        found = [k for k in keys.keys if kid is None or k.key_id == kid]
        if not found and time.monotonic() - self._keys_at > KEYS_REFETCH_SECONDS:
            found = [k for k in (await self._key_set(refresh=True)).keys if kid is None or k.key_id == kid]
        if not found:
            raise jwt.InvalidKeyError(f"no key {kid!r} in the identity provider's JWKS")
        return found[0]

    async def _key_set(self, *, refresh: bool) -> jwt.PyJWKSet:
        if self._keys is None or refresh or time.monotonic() - self._keys_at > METADATA_CACHE_SECONDS:
            metadata = await self._discovery()
            self._keys = jwt.PyJWKSet.from_dict(await self._get(metadata["jwks_uri"]))
            self._keys_at = time.monotonic()
        return self._keys

    async def _discovery(self) -> dict[str, Any]:
        """The provider's OpenID discovery document (cached); ``Unauthorized`` when it cannot be had."""
        if self._metadata is None or time.monotonic() > self._metadata_until:
            metadata = await self._get(self.issuer.rstrip("/") + DISCOVERY_PATH)
            if metadata.get("issuer") != self.issuer:
                named = metadata.get("issuer")
                raise Unauthorized(f"The identity provider's discovery document names another issuer: {named}")
            missing = [k for k in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not metadata.get(k)]
            if missing:
                raise Unauthorized(f"The identity provider's discovery document lacks {', '.join(missing)}")
            self._metadata, self._metadata_until = metadata, time.monotonic() + METADATA_CACHE_SECONDS
        return self._metadata

    async def _get(self, url: str) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=HTTP_SECONDS, verify=self._verify) as http:
                response = await http.get(url, headers={"Accept": "application/json"})
                response.raise_for_status()
                document: dict[str, Any] = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise Unauthorized(f"The identity provider could not be reached at {url}: {exc}") from exc
        return document

    def _client(self, redirect_uri: str) -> AsyncOAuth2Client:
        method = "client_secret_basic" if self._secret else "none"
        return AsyncOAuth2Client(
            client_id=self._client_id,
            client_secret=self._secret,
            scope=self._settings.oidc_scopes,
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            token_endpoint_auth_method=method,
            timeout=HTTP_SECONDS,
            verify=self._verify,
        )
