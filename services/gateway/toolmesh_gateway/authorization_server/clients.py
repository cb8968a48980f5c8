"""Who may ask for tokens: clients registered dynamically (RFC 7591, stored with their secret sealed)
and clients named by the URL of their Client ID Metadata Document, fetched under the egress rules
of upstreams (public addresses only, unless the operator opened a network), bounded in size and
time, and cached briefly. Loopback redirect URIs match on any port (RFC 8252 §7.3)."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx2
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import AnyUrl, ValidationError

from toolmesh.credentials import CredentialBox
from toolmesh.egress.bounded import bounded_client
from toolmesh.egress.http import trusting_context
from toolmesh.egress.policy import EgressPolicy
from toolmesh.loopback import is_loopback_host
from toolmesh.platform.config import Settings
from toolmesh_gateway.authorization_server import store
from toolmesh_gateway.authorization_server.addresses import OFFLINE_SCOPE, SCOPE

DOCUMENT_MAX_BYTES = 5 * 1024
"""A Client ID Metadata Document larger than this is refused (they are a few hundred bytes)."""
DOCUMENT_SECONDS = 5.0
"""How long fetching one document may take."""
DOCUMENT_CACHE_SECONDS = 300.0
"""How long a fetched document is used before it is fetched again."""
REFUSED_CACHE_SECONDS = 30.0
"""How long an unusable document (or a failed fetch) is remembered: short, a client may fix it."""
MAX_CACHED_DOCUMENTS = 1000
CLIENT_SCOPES = f"{SCOPE} {OFFLINE_SCOPE}"


class GatewayClient(OAuthClientInformationFull):
    """A client as the SDK's handlers see it, with loopback redirect URIs matching on any port."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        """The registered redirect URI ``redirect_uri`` is; a loopback one (``http://127.0.0.1``,
        ``[::1]`` or ``localhost``) may come back on another port (RFC 8252 §7.3), never another
        scheme, host or path."""
        if redirect_uri is not None and _is_loopback(redirect_uri):
            for registered in self.redirect_uris or []:
                if _is_loopback(registered) and _without_port(registered) == _without_port(redirect_uri):
                    return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


def _is_loopback(uri: AnyUrl) -> bool:
    return uri.scheme == "http" and uri.host in ("127.0.0.1", "[::1]", "::1", "localhost")


def _without_port(uri: AnyUrl) -> tuple[str, str | None, str | None, str | None]:
    return uri.scheme, uri.host, uri.path, uri.query


def is_document_url(client_id: str) -> bool:
    """Whether ``client_id`` is the URL of a Client ID Metadata Document (https, with a path)."""
    parts = urlsplit(client_id)
    return parts.scheme == "https" and bool(parts.hostname) and parts.path not in ("", "/")


class ClientDirectory:
    """Finds clients by id and keeps those that register."""

    def __init__(self, db: asyncpg.Pool, box: CredentialBox, settings: Settings, limits: httpx2.Limits) -> None:
        self._db = db
        self._box = box
        self._policy = EgressPolicy.of(False, settings.upstream_private_networks)
        self._context = trusting_context(str(settings.egress_ca_file)) if settings.egress_ca_file else None
        self._limits = limits
        self._documents: dict[str, tuple[float, GatewayClient | None]] = {}

    async def get(self, client_id: str) -> GatewayClient | None:
        """The client ``client_id`` names; None when it is unknown or its document is unusable."""
        if is_document_url(client_id):
            return await self._document_client(client_id)
        row = await store.client(self._db, client_id)
        if row is None:
            return None
        metadata: dict[str, Any] = json.loads(row["metadata"])
        secret = self._box.open(row["sealed_secret"])["secret"] if row["sealed_secret"] else None
        return GatewayClient.model_validate({**metadata, "client_id": client_id, "client_secret": secret})

    def needs_fetch(self, client_id: str) -> bool:
        """Whether finding ``client_id`` would fetch its document (a URL not cached, or cached too long)."""
        cached = self._documents.get(client_id)
        return is_document_url(client_id) and (cached is None or cached[0] <= time.monotonic())

    async def register(self, client: OAuthClientInformationFull, source: str | None) -> None:
        """Keep a client that registered (RFC 7591) from address ``source``; its secret is sealed with
        the credential key.

        Raises:
            ValueError: a redirect URI is neither https nor a loopback/app address, or a ``web``
                client names a loopback or custom-scheme one.
        """
        _check_redirects(client)
        metadata = client.model_dump(mode="json", exclude={"client_id", "client_secret"}, exclude_none=True)
        sealed = self._box.seal({"secret": client.client_secret}) if client.client_secret else None
        await store.save_client(self._db, client.client_id, metadata, sealed, source)

    async def _document_client(self, url: str) -> GatewayClient | None:
        cached = self._documents.get(url)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        client = await self._fetch(url)
        if len(self._documents) >= MAX_CACHED_DOCUMENTS:
            self._documents.clear()
        self._documents[url] = (now + (DOCUMENT_CACHE_SECONDS if client else REFUSED_CACHE_SECONDS), client)
        return client

    async def _fetch(self, url: str) -> GatewayClient | None:
        try:
            async with bounded_client(
                self._policy, self._limits, DOCUMENT_MAX_BYTES, DOCUMENT_SECONDS, self._context
            ) as http:
                response = await http.get(url, headers={"Accept": "application/json"})
            if response.status_code != 200:
                return None
            document = response.json()
        except (httpx2.HTTPError, ValueError):
            return None
        if not isinstance(document, dict) or document.get("client_id") != url:
            return None  # a document must name itself (draft-ietf-oauth-client-id-metadata-document §4.1)
        if document.get("token_endpoint_auth_method", "none") != "none" or "client_secret" in document:
            return None  # a document describes a public client; no shared secret can be in it
        try:
            client = GatewayClient.model_validate(
                {**document, "client_secret": None, "token_endpoint_auth_method": "none", "scope": CLIENT_SCOPES}
            )
            _check_redirects(client)
        except (ValidationError, ValueError):
            return None
        return client


def _check_redirects(client: OAuthClientInformationFull) -> None:
    """Refuse redirect URIs an attacker could use to collect codes or run script: plain http on a
    non-loopback host, (for a ``web`` client) anything but https, a fragment, and script or local
    schemes (``javascript:``, ``data:``, ``file:``, ``vbscript:``)."""
    uris = client.redirect_uris or []
    if not uris:
        raise ValueError("redirect_uris must name at least one redirect URI")
    for uri in uris:
        if uri.fragment:
            raise ValueError(f"A redirect URI may not have a fragment: {uri}")
        loopback = uri.scheme == "http" and is_loopback_host(uri.host)
        if client.application_type == "web" and uri.scheme != "https":
            raise ValueError(f"A web client's redirect URIs must be https: {uri}")
        if uri.scheme == "http" and not loopback:
            raise ValueError(f"An http redirect URI must be a loopback address: {uri}")
        if uri.scheme in ("javascript", "data", "file", "vbscript"):
            raise ValueError(f"Not a redirect URI: {uri}")
