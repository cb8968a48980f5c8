"""The person's side of the authorization server: what a waiting request asks for, the decision
(taken once, as the API key signed in on the consent page, or as the person who signed in at the
identity provider for that request), and the connected apps it leaves.

The token a decision leads to acts as the deciding key: its role, namespace and endpoint limits are
looked up on every use, never taken from the client. A person of the identity provider has no key:
the grant keeps the role and namespace their ID token gave at consent. A key limited to some endpoints may allow only
those; a name must be an endpoint or server of the key's own namespace."""

from __future__ import annotations

import json
import secrets
import uuid

from mcp.server.auth.provider import construct_redirect_uri

from toolmesh.contracts.connected_apps import (
    ConnectedApp,
    ConnectedAppList,
    ConsentDecision,
    ConsentPerson,
    ConsentRequest,
    SignInOptions,
)
from toolmesh.contracts.keys import Role
from toolmesh.credentials import hash_token
from toolmesh.errors import AppNotFound, AuthorizationRequestNotFound, EndpointNotFound, Forbidden, Unauthorized
from toolmesh_gateway import lookup
from toolmesh_gateway.auth import JWT_PRINCIPAL_PREFIX, Caller, Principal
from toolmesh_gateway.authorization_server import store
from toolmesh_gateway.authorization_server.addresses import MCP_PATH, resource_path
from toolmesh_gateway.authorization_server.identity_provider import IdentityProvider
from toolmesh_gateway.authorization_server.provider import AuthorizationProvider
from toolmesh_gateway.authorization_server.revocation import AppRevocations
from toolmesh_gateway.authorization_server.sign_in import SIGN_IN_PATH
from toolmesh_gateway.catalog import Catalog


class Consents:
    """Consent decisions and the connected apps they make."""

    def __init__(
        self,
        provider: AuthorizationProvider,
        revocations: AppRevocations,
        catalog: Catalog,
        identity_provider: IdentityProvider | None = None,
    ) -> None:
        self._provider = provider
        self._revocations = revocations
        self._catalog = catalog
        self._identity_provider = identity_provider
        self._db = provider.db

    def sign_in_options(self) -> SignInOptions:
        """Whether a signed-out person may sign in at an identity provider to answer a request."""
        if self._identity_provider is None:
            return SignInOptions()
        return SignInOptions(identity_provider=self._identity_provider.name, sign_in_path=SIGN_IN_PATH)

    async def person(self, request_id: str, secret: str) -> Principal:
        """The person who signed in at the identity provider for this request, when ``secret`` is the one
        their browser was given for it; ``Unauthorized`` otherwise."""
        row = await store.pending_request(self._db, request_id)
        if (
            row is None
            or row["identity"] is None
            or not secrets.compare_digest(row["identity_secret_hash"], hash_token(secret))
        ):
            raise Unauthorized("Sign in to answer this request")
        identity = row["identity"]
        return Principal(
            key_id=identity["principal_id"],
            name=identity["name"],
            role=Role(identity["role"]),
            namespace=identity["namespace"],
        )

    async def describe(self, request_id: str, person: Principal | None = None) -> ConsentRequest:
        """What a waiting request asks for (its id is the secret that reaches the consent page); with
        ``person``, who signed in at the identity provider to answer it."""
        row = await store.pending_request(self._db, request_id)
        if row is None:
            raise _unknown(request_id)
        params = json.loads(row["params"])
        signed_in_as = None
        if person is not None:
            signed_in_as = ConsentPerson(name=person.name, role=person.role, namespace=person.namespace)
        return ConsentRequest(
            request_id=request_id,
            client_id=row["client_id"],
            client_name=row["client_name"],
            client_uri=params.get("client_uri"),
            redirect_uri=params["redirect_uri"],
            resource=params["resource"],
            endpoint=resource_path(params["resource"], row["issuer"]) or MCP_PATH,
            scopes=params["scopes"],
            expires_at=row["expires_at"],
            signed_in_as=signed_in_as,
        )

    async def decide(self, request_id: str, allow: bool, principal: Principal) -> ConsentDecision:
        """Allow (a code for the client) or deny (``access_denied``); either way the request is used up.

        Raises:
            Forbidden: the key may not use the endpoint asked for.
            EndpointNotFound: the endpoint is not in the key's namespace.
            AuthorizationRequestNotFound: unknown, decided already, or expired.
        """
        pending = await store.pending_request(self._db, request_id)
        if pending is None:
            raise _unknown(request_id)
        params = json.loads(pending["params"])
        endpoint = resource_path(params["resource"], pending["issuer"]) or MCP_PATH
        if allow:
            self._check_endpoint(principal, endpoint)
        row = await store.take_request(self._db, request_id)
        if row is None:
            raise _unknown(request_id)
        answer: dict[str, str] = {"iss": pending["issuer"]}
        if params.get("state") is not None:
            answer["state"] = params["state"]
        if not allow:
            answer |= {"error": "access_denied", "error_description": "The person denied the request"}
        else:
            answer["code"] = await self._provider.issue_code(row["client_id"], _consenter(principal), params)
        return ConsentDecision(redirect_to=construct_redirect_uri(params["redirect_uri"], **answer))

    def _check_endpoint(self, principal: Principal, endpoint: str) -> None:
        name = endpoint.removeprefix(MCP_PATH).lstrip("/") or None
        if principal.endpoints is not None and (name is None or name not in principal.endpoints):
            raise Forbidden(
                f"This key may not use {endpoint}; its endpoints: {', '.join(sorted(principal.endpoints)) or '(none)'}",
                {"endpoints": sorted(principal.endpoints)},
            )
        if name is None:
            return
        namespace = principal.namespace
        if (
            self._catalog.bundle(namespace, name) is None
            and lookup.server_by_name(self._catalog.view(namespace), name) is None
        ):
            raise EndpointNotFound(f"No endpoint or server {name} in namespace {namespace}", {"endpoint": endpoint})

    async def apps(self, principal: Principal) -> ConnectedAppList:
        """The caller's own connected apps; an admin's: its namespace's (but those of owner keys, as it
        does not see owner keys); the owner's: every one (a key limited to MCP endpoints: its own)."""
        if _manages_apps(principal):
            rows = await store.grants(self._db, key_id=None, namespace=_scope(principal))
        else:
            rows = await store.grants(self._db, key_id=principal.key_id, namespace=None)
        apps = [_app(r) for r in rows if _may_manage(principal, r)]
        return ConnectedAppList(apps=apps, total=len(apps))

    async def disconnect(self, grant_id: str, caller: Caller) -> None:
        """Revoke a connected app (its tokens stop working on every gateway).

        Raises:
            AppNotFound: no such app the caller may see.
        """
        principal = caller.principal
        row = await store.grant(self._db, grant_id) if _is_uuid(grant_id) else None
        if row is None or not _may_manage(principal, row):
            raise AppNotFound(f"Connected app not found: {grant_id}", {"app_id": grant_id})
        await self._revocations.revoke(
            grant_id, actor=caller.actor, reason="disconnected", ip_address=caller.ip_address
        )


def _consenter(principal: Principal) -> store.Consenter:
    """How a grant keeps who consented: an API key by its id; a person of the identity provider (no key)
    by who the provider said they were."""
    if not principal.key_id.startswith(JWT_PRINCIPAL_PREFIX):
        return store.Consenter(key_id=principal.key_id)
    identity = {"principal_id": principal.key_id, "name": principal.name}
    return store.Consenter(identity=identity | {"role": str(principal.role), "namespace": principal.namespace})


def _scope(principal: Principal) -> str | None:
    return None if principal.role is Role.OWNER else principal.namespace


def _manages_apps(principal: Principal) -> bool:
    """Whether ``principal`` manages others' apps: an owner or admin key not limited to MCP endpoints
    (a limited one manages only the apps it connected)."""
    return principal.manages and principal.endpoints is None


def _may_manage(principal: Principal, row: store.Row) -> bool:
    if row["key_id"] == principal.key_id:
        return True
    if not _manages_apps(principal) or (principal.role is not Role.OWNER and row["namespace"] != principal.namespace):
        return False
    return principal.role is Role.OWNER or row["role"] != str(Role.OWNER)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _unknown(request_id: str) -> AuthorizationRequestNotFound:
    return AuthorizationRequestNotFound(
        "Authorization request not found: unknown, decided already or expired", {"request_id": request_id[:16]}
    )


def _app(row: store.Row) -> ConnectedApp:
    return ConnectedApp(
        id=row["grant_id"],
        client_id=row["client_id"],
        client_name=row["client_name"],
        key_id=row["key_id"],
        key_name=row["key_name"],
        role=Role(row["role"]),
        namespace=row["namespace"],
        resource=row["resource"],
        scopes=list(row["scopes"]),
        created_at=row["created_at"],
        refreshed_at=row["refreshed_at"],
        access_expires_at=row["access_expires_at"],
        refresh_expires_at=row["refresh_expires_at"],
    )
