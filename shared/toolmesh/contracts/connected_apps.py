"""MCP clients signed in with OAuth ("connected apps"): the consent a person gives in the console
(``/api/v1/oauth/requests/{id}``) and the apps acting as a key (``/api/v1/auth/apps``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from toolmesh.contracts.keys import Role


class ConsentPerson(BaseModel):
    """Who answers a request after signing in at the identity provider (the ID token named them)."""

    name: str
    role: Role
    namespace: str


class ConsentRequest(BaseModel):
    """What a client asks for, shown on the consent page before the person allows or denies it."""

    request_id: str
    client_id: str
    client_name: str | None = None
    client_uri: str | None = None
    redirect_uri: str
    resource: str
    endpoint: str
    scopes: list[str]
    expires_at: datetime
    signed_in_as: ConsentPerson | None = None
    """Set when the caller is the person who signed in at the identity provider for this request."""


class SignInOptions(BaseModel):
    """``GET /api/v1/oauth/sign-in``: how a signed-out person may answer a request besides an API key."""

    identity_provider: str | None = None
    """The name of the identity provider they may sign in with (None: API keys only)."""
    sign_in_path: str | None = None
    """Where to send the browser, with ``?request=<id>`` (None: API keys only)."""


class ConsentDecisionRequest(BaseModel):
    """``POST /api/v1/oauth/requests/{id}/decision``: allow or deny, as the key that signs the request."""

    model_config = ConfigDict(extra="forbid")

    allow: bool


class ConsentDecision(BaseModel):
    """Where the browser goes next: the client's redirect URI with a code (allowed) or an error."""

    redirect_to: str


class ConnectedApp(BaseModel):
    """An MCP client a person allowed to act as their key at one MCP endpoint."""

    id: str
    client_id: str
    client_name: str | None = None
    key_id: str
    key_name: str
    role: Role
    namespace: str
    resource: str
    scopes: list[str]
    created_at: datetime
    refreshed_at: datetime | None = None
    access_expires_at: datetime | None = None
    refresh_expires_at: datetime | None = None


class ConnectedAppList(BaseModel):
    """``GET /api/v1/auth/apps``: newest first."""

    apps: list[ConnectedApp]
    total: int
