"""The documents toolmesh publishes about an endpoint (``front_door.server_cards``) are valid against
the published schemas whatever the endpoint's names and texts, and the bundled schemas are the
published files (their sha256 as ``SOURCE.json`` records it)."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.mcp_schemas import SCHEMAS, card_validator, server_json_validator
from toolmesh_gateway.front_door.server_cards import (
    TEXT_MAX,
    EndpointFacts,
    catalog_entry,
    publisher,
    server_card,
    server_json,
)

pytestmark = pytest.mark.unit
CAPABILITIES = {"tools": {"listChanged": True}, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def facts(path: str, title: str = "dev", description: str = "What the agent may use") -> EndpointFacts:
    return EndpointFacts(path, "endpoint", title, description, "0.1.0", CAPABILITIES)


def test_the_bundled_schemas_are_the_published_files() -> None:
    source = json.loads((SCHEMAS / "SOURCE.json").read_text())
    for name, about in source.items():
        assert hashlib.sha256((SCHEMAS / name).read_bytes()).hexdigest() == about["sha256"], name


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("https://mesh.example.com", "com.example.mesh"),
        ("https://Mesh.Example.com:8443/prefix", "com.example.mesh"),
        ("http://127.0.0.1:8000", "127.0.0.1"),
        ("http://[::1]:8000", "1"),
        ("http://localhost:8000", "localhost"),
    ],
)
def test_the_publisher_is_the_public_host_reversed(base: str, expected: str) -> None:
    assert publisher(base) == expected


@pytest.mark.parametrize("base", ["https://mesh.example.com", "http://127.0.0.1:8000", "http://[::1]:8000"])
@pytest.mark.parametrize(
    "endpoint",
    [
        facts("/mcp", "toolmesh", "Tools of every MCP server registered with toolmesh."),
        facts("/mcp/" + "n" * 255),
        facts("/mcp/dev", description="x" * 1000),
        facts("/mcp/dev", description="  \n\t "),
        facts("/mcp/dev", description="line one\nline two\x0b"),
    ],
)
def test_documents_validate_for_any_endpoint(base: str, endpoint: EndpointFacts) -> None:
    card, listed = server_card(base, endpoint), server_json(base, endpoint)
    assert [e.message for e in card_validator().iter_errors(card)] == []
    assert [e.message for e in server_json_validator().iter_errors(listed)] == []
    assert len(card["description"]) <= TEXT_MAX and card["description"].strip() == card["description"]
    assert card["remotes"][0]["url"] == listed["remotes"][0]["url"] == base + endpoint.path
    assert card["_meta"]["toolmesh/endpoint"]["capabilities"] == CAPABILITIES


def test_a_long_description_is_cut_with_an_ellipsis() -> None:
    card = server_card("https://mesh.example.com", facts("/mcp/dev", description="word " * 50))
    assert len(card["description"]) == TEXT_MAX and card["description"].endswith("…")


def test_the_catalog_entry_points_at_the_card() -> None:
    entry = catalog_entry("https://mesh.example.com", facts("/mcp/dev"))
    assert entry == {
        "identifier": "urn:air:mesh.example.com:mcp:dev",
        "type": "application/mcp-server-card+json",
        "url": "https://mesh.example.com/mcp/dev/server-card",
    }


def test_an_invalid_card_is_refused_by_the_bundled_schema() -> None:
    """The validators check: a card without a version or with a name of no namespace is refused."""
    card = server_card("https://mesh.example.com", facts("/mcp/dev"))
    assert list(card_validator().iter_errors({**card, "name": "dev"}))
    assert list(server_json_validator().iter_errors({k: v for k, v in card.items() if k != "version"}))
