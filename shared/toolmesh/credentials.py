"""Credentials: sealed at rest (AES-256-GCM), expanded only at connect time, masked on the way out."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MASK = "***"
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_KEYS = (
    "authorization",
    "token",
    "secret",
    "password",
    "api-key",
    "api_key",
    "apikey",
    "key",
    "cookie",
)


class CredentialBox:
    """Seals and opens ``connection_config`` with a key derived from ``MCP_CREDENTIAL_KEY``."""

    def __init__(self, key_material: str) -> None:
        self._aead = AESGCM(_derive_key(key_material))

    def seal(self, config: Mapping[str, Any]) -> str:
        """Encrypt a config to a printable token (nonce + ciphertext, base64)."""
        nonce = os.urandom(12)
        data = json.dumps(config, sort_keys=True).encode()
        return base64.urlsafe_b64encode(nonce + self._aead.encrypt(nonce, data, b"toolmesh")).decode()

    def open(self, sealed: str) -> dict[str, Any]:
        """Decrypt a token made by :meth:`seal`."""
        raw = base64.urlsafe_b64decode(sealed.encode())
        plain = self._aead.decrypt(raw[:12], raw[12:], b"toolmesh")
        result: dict[str, Any] = json.loads(plain)
        return result


def _derive_key(material: str) -> bytes:
    try:
        raw = base64.b64decode(material, validate=True)
        if len(raw) == 32:
            return raw
    except ValueError:
        pass
    return hashlib.sha256(material.encode()).digest()


def new_key() -> str:
    """A fresh random key, base64 (what ``toolmesh up`` stores when none is configured)."""
    return base64.b64encode(secrets.token_bytes(32)).decode()


def expand_env(value: Any, environ: Mapping[str, str]) -> Any:
    """Replace ``${VAR}`` in every string of a config (used only inside the session-worker)."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: environ.get(m.group(1), ""), value)
    if isinstance(value, list):
        return [expand_env(v, environ) for v in value]
    if isinstance(value, dict):
        return {k: expand_env(v, environ) for k, v in value.items()}
    return value


def _is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(part in lowered for part in _SECRET_KEYS)


def _mask_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None and not parts.query:
        return url
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    if parts.username:
        netloc = f"{parts.username}:{MASK}@{netloc}"
    query = MASK if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a connection config safe to show: header and env values and URL secrets hidden."""
    masked: dict[str, Any] = {}
    for key, value in config.items():
        if key in ("headers", "env") and isinstance(value, Mapping):
            masked[key] = {k: MASK for k in value}
        elif key in ("url", "base_url") and isinstance(value, str):
            masked[key] = _mask_url(value)
        elif isinstance(value, str) and _is_secret_key(key):
            masked[key] = MASK
        else:
            masked[key] = value
    return masked


def secret_values(config: Mapping[str, Any]) -> list[str]:
    """The strings of a (possibly expanded) config that must never be shown: header and env
    values, URL passwords and query values."""
    found: list[str] = []
    for key in ("headers", "env"):
        mapping = config.get(key)
        if isinstance(mapping, Mapping):
            found.extend(str(v) for v in mapping.values())
    for key in ("url", "base_url"):
        value = config.get(key)
        if isinstance(value, str):
            parts = urlsplit(value)
            if parts.password:
                found.append(parts.password)
            found.extend(v for pair in parts.query.split("&") for v in pair.split("=", 1)[1:])
    for key, value in config.items():
        if isinstance(value, str) and _is_secret_key(key):
            found.append(value)
    secrets_only: list[str] = []
    for value in found:
        secrets_only.extend(v for v in (value, value.removeprefix("Bearer ").strip()) if len(v) >= 6)
    return secrets_only


def hash_token(token: str) -> str:
    """The stored form of an API key."""
    return hashlib.sha256(token.encode()).hexdigest()
