"""``/api/v1/auth/keys``: API keys of principals, their roles and namespaces."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolmesh.naming import NAMESPACE_PATTERN, SERVER_NAME_RE

KEY_TOKEN_PREFIX = "tm_"
KEY_TOKEN_PATTERN = r"(?<![\w-])tm[or]?_[A-Za-z0-9_-]{43}(?![\w-])"
"""The form of an API key token (``tm_`` and 256 random bits in base64url), and of the OAuth access
(``tmo_``) and refresh (``tmr_``) tokens of the gateway's authorization server: logs mask them
wherever they appear, whoever created them."""


class Role(StrEnum):
    """What a principal may do: ``owner`` everything everywhere; ``admin`` manage its namespace;
    ``agent`` what a user may, plus register servers and manage the ones it registered;
    ``user`` list, search and call inside its namespace."""

    OWNER = "owner"
    ADMIN = "admin"
    AGENT = "agent"
    USER = "user"

    @property
    def manages(self) -> bool:
        """True for the roles that manage a namespace (owner, admin): its servers, keys, endpoints and
        approvals, and the decisions no other role may take (running commands, reaching private
        addresses, leaving new tools unreviewed)."""
        return self in (Role.OWNER, Role.ADMIN)


class CreateKeyRequest(BaseModel):
    """``POST /api/v1/auth/keys``; ``namespace`` defaults to the caller's."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
    role: Role = Role.USER
    namespace: str | None = Field(None, pattern=NAMESPACE_PATTERN)
    endpoints: list[str] | None = Field(
        None,
        max_length=100,
        description="Limit the key to these MCP endpoints (bundles) of its namespace: it may use nothing else",
    )

    @field_validator("endpoints")
    @classmethod
    def _endpoint_names(cls, names: list[str] | None) -> list[str] | None:
        for name in names or []:
            if not SERVER_NAME_RE.match(name):
                raise ValueError(f"{name!r} is not an endpoint name")
        return names


class KeyInfo(BaseModel):
    """A key as listed: never its token."""

    id: str
    name: str
    role: Role
    namespace: str
    created_at: datetime
    created_by: str | None = None
    endpoints: list[str] | None = None


class CreatedKey(KeyInfo):
    """The 201 body: the only time the token is shown (only its hash is stored).

    A replay of the creating request (same ``Idempotency-Key``) answers with the key, ``token``
    null and ``note`` saying why: the token is kept nowhere, not even for replays.
    """

    token: str | None
    note: str | None = None


class KeyList(BaseModel):
    """``GET /api/v1/auth/keys``."""

    keys: list[KeyInfo]
    total: int


class Identity(BaseModel):
    """``GET /api/v1/auth/me``: who the bearer token belongs to (what a client may show it)."""

    key_id: str
    name: str
    role: Role
    namespace: str
    manages: bool = Field(description="May manage servers, approvals and keys and read the audit log")
