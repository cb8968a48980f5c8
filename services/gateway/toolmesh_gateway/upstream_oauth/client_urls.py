"""The gateway's addresses as an OAuth client: its callback (the redirect URI), and its Client ID
Metadata Document (MCP authorization 2025-11-25), served at ``<TOOLMESH_PUBLIC_URL>/oauth/client-metadata.json``,
whose URL is toolmesh's ``client_id`` at every authorization server that advertises
``client_id_metadata_document_supported`` (no registration needed)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from toolmesh.errors import ValidationFailed
from toolmesh.loopback import is_loopback_host

CALLBACK_PATH = "/oauth/callback"
DOCUMENT_PATH = "/oauth/client-metadata.json"
CLIENT_NAME = "toolmesh"


def callback_url(public_url: str | None, origin: str | None) -> str:
    """Where the authorization server sends the browser back: ``TOOLMESH_PUBLIC_URL``, else the base
    URL the caller reached this gateway at.

    Raises:
        ValidationFailed: neither is known (a caller of the NATS API, with no public URL set).
    """
    base = public_url or origin
    if not base:
        raise ValidationFailed(
            "No callback URL: set TOOLMESH_PUBLIC_URL, or authorize through the gateway's HTTP API",
            {"step": "authorize"},
        )
    return f"{base.rstrip('/')}{CALLBACK_PATH}"


def document_url(public_url: str | None) -> str | None:
    """The document's URL, the client id it names; None without a public URL an authorization server
    can fetch (``https``, or ``http`` on a loopback address for a gateway on the same host)."""
    if not public_url:
        return None
    parts = urlsplit(public_url)
    if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback_host(parts.hostname)):
        return None
    return f"{public_url.rstrip('/')}{DOCUMENT_PATH}"


def client_document(public_url: str) -> dict[str, Any]:
    """The document: a public client (PKCE, no secret) whose one redirect URI is the gateway's callback."""
    return {
        "client_id": document_url(public_url),
        "client_name": CLIENT_NAME,
        "redirect_uris": [callback_url(public_url, None)],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
