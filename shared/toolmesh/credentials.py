"""Credentials: sealed at rest (AES-256-GCM), expanded only at connect time, masked on the way out."""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from toolmesh.redaction import Secret
from toolmesh.secret_text import MASK, args_secrets, is_secret_name, mask_args, mask_url, url_secrets

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# toolmesh's own variables (its settings, the credential keys) and the database password the driver
# reads; matched in every spelling, since settings are read from the environment case-insensitively.
_PROTECTED = re.compile(r"TOOLMESH_|MCP_AGGREGATOR_|MCP_CREDENTIAL_KEY|PGPASSWORD$|PGPASSFILE$", re.IGNORECASE)
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
    """Seals and opens ``connection_config`` with a key derived from ``MCP_CREDENTIAL_KEY``.

    A sealed token is ``<key id>:<base64 of nonce + ciphertext>``; the key id (a fingerprint, not
    the key) says which key sealed it. Keys being rotated out (``MCP_CREDENTIAL_KEY_PREVIOUS``)
    still open what they sealed, so a deployment can reseal every config and then drop them.
    Tokens from before key ids existed carry none and are tried with every key.
    """

    def __init__(self, key_material: str, previous: Sequence[str] = ()) -> None:
        current = _derive_key(key_material)
        self.key_id = _key_id(current)
        self._aead = AESGCM(current)
        self._keys = {self.key_id: self._aead}
        self._secrets = [current]  # current first, then those being rotated out
        for material in previous:
            key = _derive_key(material)
            self._keys.setdefault(_key_id(key), AESGCM(key))
            self._secrets.append(key)

    def purpose_keys(self, purpose: str) -> list[bytes]:
        """Keys of their own for ``purpose``, another use of the same deployment secret (every replica
        derives the same ones): from the current key first, then from the keys being rotated out."""
        return [hmac.new(key, purpose.encode(), hashlib.sha256).digest() for key in self._secrets]

    @classmethod
    def from_settings(cls, current: str | None, previous: str | None) -> CredentialBox:
        """The box of ``MCP_CREDENTIAL_KEY`` and the comma-separated ``MCP_CREDENTIAL_KEY_PREVIOUS``."""
        if not current:
            raise ValueError("MCP_CREDENTIAL_KEY must be set")
        return cls(current, [k.strip() for k in (previous or "").split(",") if k.strip()])

    def seal(self, config: Mapping[str, Any]) -> str:
        """Encrypt a config under the current key to a printable token."""
        nonce = os.urandom(12)
        data = json.dumps(config, sort_keys=True).encode()
        body = base64.urlsafe_b64encode(nonce + self._aead.encrypt(nonce, data, _AAD)).decode()
        return f"{self.key_id}:{body}"

    def open(self, sealed: str) -> dict[str, Any]:
        """Decrypt a token made by :meth:`seal` with this key or a previous one.

        Raises:
            cryptography.exceptions.InvalidTag: no key of this box sealed it (or it was altered).
        """
        key_id, _, body = sealed.rpartition(":")
        raw = base64.urlsafe_b64decode(body.encode())
        keys = [self._keys[key_id]] if key_id in self._keys else list(self._keys.values())
        for aead in keys[:-1]:
            try:
                return _loads(aead.decrypt(raw[:12], raw[12:], _AAD))
            except InvalidTag:
                continue
        return _loads(keys[-1].decrypt(raw[:12], raw[12:], _AAD))

    def is_current(self, sealed: str) -> bool:
        """True when ``sealed`` was sealed under the current key."""
        return sealed.partition(":")[0] == self.key_id and ":" in sealed


_AAD = b"toolmesh"


def _loads(plain: bytes) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(plain)
    return result


def _key_id(key: bytes) -> str:
    """A public fingerprint of a key: says which key sealed a token, reveals nothing of it."""
    return hashlib.sha256(b"toolmesh-key-id" + key).hexdigest()[:12]


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


def is_protected_variable(name: str) -> bool:
    """True for toolmesh's own variables (its settings, ``MCP_CREDENTIAL_KEY`` and
    ``MCP_CREDENTIAL_KEY_PREVIOUS``), in any case: a server's config may never reference them, or a
    registered server could read the keys of the house."""
    return bool(_PROTECTED.match(name))


def variable_references(value: Any) -> list[str]:
    """Every variable a config (or any part of it) references as ``${VAR}``."""
    if isinstance(value, str):
        return [m.group(1) for m in _VAR.finditer(value)]
    if isinstance(value, list):
        return [name for v in value for name in variable_references(v)]
    if isinstance(value, dict):
        return [name for v in value.values() for name in variable_references(v)]
    return []


def protected_references(value: Any) -> list[str]:
    """The protected variables a config (or any part of it) references as ``${VAR}``."""
    return [name for name in variable_references(value) if is_protected_variable(name)]


def may_expand(name: str, patterns: Sequence[str]) -> bool:
    """True when ``name`` matches one of the glob ``patterns`` and is none of toolmesh's own variables."""
    return not is_protected_variable(name) and any(fnmatch.fnmatchcase(name, p) for p in patterns)


def expandable_environment(environ: Mapping[str, str], patterns: Sequence[str]) -> dict[str, str]:
    """The variables of ``environ`` a config may expand (``may_expand``)."""
    return {k: v for k, v in environ.items() if may_expand(k, patterns)}


def expand_env(value: Any, environ: Mapping[str, str]) -> Any:
    """Replace ``${VAR}`` in every string of a config (used only inside the session-worker);
    protected variables expand to nothing."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: "" if is_protected_variable(m.group(1)) else environ.get(m.group(1), ""), value)
    if isinstance(value, list):
        return [expand_env(v, environ) for v in value]
    if isinstance(value, dict):
        return {k: expand_env(v, environ) for k, v in value.items()}
    return value


def _is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(part in lowered for part in _SECRET_KEYS)


def mask_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a connection config safe to show: header and env values, URL secrets and
    secrets written in STDIO ``args`` (``--api-key X``, ``TOKEN=X``, ...) hidden."""
    masked: dict[str, Any] = {}
    for key, value in config.items():
        if key in ("headers", "env", "credentials") and isinstance(value, Mapping):
            masked[key] = {k: MASK for k in value}
        elif key in ("url", "base_url", "spec_url") and isinstance(value, str):
            masked[key] = mask_url(value)
        elif key == "args" and isinstance(value, list):
            masked[key] = mask_args([str(a) for a in value])
        elif key == "auth" and isinstance(value, Mapping):
            masked[key] = {k: MASK if k == "client_secret" else v for k, v in value.items()}
        elif isinstance(value, str) and _is_secret_key(key):
            masked[key] = MASK
        else:
            masked[key] = value
    return masked


def secret_values(config: Mapping[str, Any]) -> list[Secret]:
    """What of a (possibly expanded) config must never be shown, for the log redactor: header and
    env values, URL passwords and query values, secrets written in ``args``."""
    found: list[Secret] = []
    for key in ("headers", "env", "credentials"):
        mapping = config.get(key)
        if isinstance(mapping, Mapping):
            for name, value in mapping.items():
                found.append(Secret(str(value), str(name), sensitive=is_secret_name(str(name))))
                scheme, _, credential = str(value).partition(" ")
                if scheme.lower() in ("bearer", "basic") and credential.strip():
                    found.append(Secret(credential.strip(), scheme))
    for key in ("url", "base_url", "spec_url"):
        value = config.get(key)
        if isinstance(value, str):
            found.extend(url_secrets(value))
    if isinstance(config.get("args"), list):
        found.extend(args_secrets([str(a) for a in config["args"]]))
    auth = config.get("auth")
    if isinstance(auth, Mapping) and isinstance(auth.get("client_secret"), str):
        found.append(Secret(auth["client_secret"], "client_secret"))
    for key, value in config.items():
        if isinstance(value, str) and _is_secret_key(key) and key not in ("url", "base_url", "spec_url"):
            found.append(Secret(value, key))
    return found


def hash_token(token: str) -> str:
    """The stored form of an API key."""
    return hashlib.sha256(token.encode()).hexdigest()
