"""Optional JWT bearer tokens from an identity provider: signature (JWKS from a file or a URL),
issuer, audience and expiry verified; role and namespace taken from configured claims.

An owner is never made from a token: a JWT carries ``admin`` or ``user`` only.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import jwt

from toolmesh.contracts.keys import Role
from toolmesh.errors import Unauthorized
from toolmesh.naming import NAMESPACE_PATTERN
from toolmesh.platform.config import Settings

_NAMESPACE = re.compile(NAMESPACE_PATTERN)
_JWKS_CACHE_SECONDS = 300


def looks_like_jwt(token: str) -> bool:
    """Three dot-separated parts, the shape of a JWS compact serialisation (API keys have none)."""
    return token.count(".") == 2


class JwtVerifier:
    """Verifies tokens against the configured issuer, audience and keys."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._keys: jwt.PyJWKSet | None = None
        self._client: jwt.PyJWKClient | None = None
        if settings.jwt_jwks_file is not None:
            self._keys = jwt.PyJWKSet.from_dict(json.loads(settings.jwt_jwks_file.read_text()))
        elif settings.jwt_jwks_url:
            self._client = jwt.PyJWKClient(settings.jwt_jwks_url, lifespan=_JWKS_CACHE_SECONDS, timeout=5)

    @classmethod
    def configured(cls, settings: Settings) -> JwtVerifier | None:
        """A verifier when JWT bearer tokens are switched on (a JWKS is configured), else None."""
        if settings.jwt_jwks_file is None and not settings.jwt_jwks_url:
            return None
        return cls(settings)

    async def claims(self, token: str) -> dict[str, Any]:
        """The verified claims of ``token``; ``Unauthorized`` for any failure."""
        try:
            key = await self._signing_key(token)
            decoded: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(self._settings.jwt_algorithms),
                issuer=self._settings.jwt_issuer,
                audience=self._settings.jwt_audience,
                options={"require": ["exp", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"Invalid bearer token: {exc}") from exc
        return decoded

    async def _signing_key(self, token: str) -> jwt.PyJWK:
        """The JWK the token names: as a ``PyJWK``, so the token is verified with that key's own algorithm
        (another ``alg`` in the header is refused, not fed to a key of another kind)."""
        if self._client is not None:
            return await asyncio.to_thread(self._client.get_signing_key_from_jwt, token)
        assert self._keys is not None
        kid = jwt.get_unverified_header(token).get("kid")
        candidates = [k for k in self._keys.keys if kid is None or k.key_id == kid]
        if not candidates:
            raise jwt.InvalidKeyError(f"no key {kid!r} in the configured JWKS")
        return candidates[0]

    def identity(self, claims: dict[str, Any]) -> tuple[str, Role, str]:
        """``(subject, role, namespace)`` from the configured claims."""
        return identity_of(claims, self._settings)


def identity_of(claims: dict[str, Any], settings: Settings) -> tuple[str, Role, str]:
    """``(subject, role, namespace)`` of verified claims, read from the configured role and namespace
    claims; ``Unauthorized`` when they are missing or not a role a token may carry (never ``owner``)."""
    role = str(claims.get(settings.jwt_role_claim, ""))
    namespace = str(claims.get(settings.jwt_namespace_claim, ""))
    if role not in (Role.ADMIN, Role.AGENT, Role.USER):
        raise Unauthorized(f"Token claim {settings.jwt_role_claim!r} must be 'admin', 'agent' or 'user'")
    if not _NAMESPACE.match(namespace):
        raise Unauthorized(f"Token claim {settings.jwt_namespace_claim!r} is not a valid namespace")
    return str(claims["sub"]), Role(role), namespace
