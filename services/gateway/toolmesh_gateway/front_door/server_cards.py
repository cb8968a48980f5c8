"""What toolmesh publishes about its MCP endpoints: the Server Card (the experimental MCP extension,
``https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json``), the MCP Registry's
``server.json`` (schema of 2025-12-11) describing the endpoint as a remote, and the AI Catalog entry
that points at a card.

A document says what a client sees once connected and nothing more: the endpoint's URL at the
gateway's public address, its transport, the protocol versions it speaks, the capabilities
``server/discover`` answers, the version ``serverInfo`` carries, and how to authenticate (a bearer
token; the endpoint's protected-resource metadata). Never an upstream's URL, command, connection
config or credentials.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

from toolmesh_gateway.authorization_server.addresses import MCP_PATH, SCOPE, resource_metadata_url

SERVER_CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
SERVER_JSON_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
CARD_MEDIA_TYPE = "application/mcp-server-card+json"
CARD_SUFFIX = "/server-card"
SERVER_JSON_SUFFIX = "/server.json"
META_KEY = "toolmesh/endpoint"
"""The card's ``_meta`` key of what toolmesh adds: the endpoint's kind, capabilities and authorization."""
PUBLISHER_META_KEY = "io.modelcontextprotocol.registry/publisher-provided"
"""Where ``server.json`` carries the same (the registry's key for a publisher's metadata)."""
TEXT_MAX = 100
"""The longest ``title`` and ``description`` both schemas allow."""
NAME_MAX = 200
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


@dataclass(frozen=True)
class EndpointFacts:
    """One endpoint as its documents describe it."""

    path: str
    """``/mcp`` or ``/mcp/{name}``."""
    kind: str
    """``aggregate``, ``endpoint`` (a bundle) or ``server`` (one registered server, served unchanged)."""
    title: str
    description: str
    version: str
    """The ``serverInfo.version`` the endpoint answers with."""
    capabilities: dict[str, Any] = field(default_factory=dict)
    """What ``server/discover`` answers (empty for a server that has not connected yet)."""
    query: str = ""
    """``?namespace=…`` when the owner reads an endpoint of another namespace than its own, else empty."""


def publisher(base: str) -> str:
    """The reverse-DNS namespace of the documents' names: the public host's labels reversed (an IP
    address as it is), without the port."""
    host = urlsplit(base).hostname or "localhost"
    try:
        ipaddress.ip_address(host)
        labels = [host]
    except ValueError:
        labels = list(reversed(host.split(".")))
    return _UNSAFE.sub("-", ".".join(labels)).strip(".-") or "localhost"


def server_card(base: str, facts: EndpointFacts) -> dict[str, Any]:
    """The Server Card of the endpoint at ``base`` (the gateway's public URL, no trailing ``/``)."""
    remote = {**_remote(base, facts), "supportedProtocolVersions": list(SUPPORTED_PROTOCOL_VERSIONS)}
    return {
        "$schema": SERVER_CARD_SCHEMA,
        **_identity(base, facts),
        "remotes": [remote],
        "_meta": {META_KEY: _toolmesh_meta(base, facts)},
    }


def server_json(base: str, facts: EndpointFacts) -> dict[str, Any]:
    """The MCP Registry ``server.json`` of the endpoint: the same identity, the endpoint as its remote."""
    return {
        "$schema": SERVER_JSON_SCHEMA,
        **_identity(base, facts),
        "remotes": [_remote(base, facts)],
        "_meta": {PUBLISHER_META_KEY: {META_KEY: _toolmesh_meta(base, facts)}},
    }


def catalog_entry(base: str, facts: EndpointFacts) -> dict[str, Any]:
    """The AI Catalog entry pointing at the endpoint's card (``urn:air:{publisher}:mcp:{name}``)."""
    host = urlsplit(base).hostname or "localhost"
    return {
        "identifier": f"urn:air:{host}:mcp:{_slug(facts)}",
        "type": CARD_MEDIA_TYPE,
        "url": f"{base}{facts.path}{CARD_SUFFIX}{facts.query}",
    }


def _identity(base: str, facts: EndpointFacts) -> dict[str, Any]:
    return {
        "name": f"{publisher(base)}/{_slug(facts)}"[:NAME_MAX],
        "title": _short(facts.title),
        "description": _short(facts.description),
        "version": facts.version[:255],
    }


def _remote(base: str, facts: EndpointFacts) -> dict[str, Any]:
    token = "A toolmesh API key, or an OAuth access token issued for this endpoint"
    described = f"{token}, as a bearer token"
    return {
        "type": "streamable-http",
        "url": f"{base}{facts.path}{facts.query}",
        "headers": [
            {
                "name": "Authorization",
                "description": described,
                "isRequired": True,
                "isSecret": True,
                "value": "Bearer {token}",
                "variables": {"token": {"description": token, "isRequired": True, "isSecret": True}},
            }
        ],
    }


def _toolmesh_meta(base: str, facts: EndpointFacts) -> dict[str, Any]:
    return {
        "kind": facts.kind,
        "capabilities": facts.capabilities,
        "authorization": {
            "scheme": "bearer",
            "resourceMetadata": resource_metadata_url(base, facts.path),
            "scopes": [SCOPE],
        },
    }


def _slug(facts: EndpointFacts) -> str:
    """``mcp`` for the aggregate, else the endpoint's name."""
    return "mcp" if facts.path == MCP_PATH else facts.path.rsplit("/", 1)[-1]


def _short(text: str) -> str:
    """``text`` on one line, at most ``TEXT_MAX`` characters (an ellipsis where cut), never empty."""
    flat = " ".join(text.split()) or "MCP endpoint of toolmesh"
    return flat if len(flat) <= TEXT_MAX else flat[: TEXT_MAX - 1].rstrip() + "…"
