"""What the gateway's authorization server takes for one of its MCP endpoints (an RFC 8707 resource),
for a Client ID Metadata Document URL, and for the same loopback redirect URI on another port."""

from __future__ import annotations

import pytest
from mcp.shared.auth import InvalidRedirectUriError
from pydantic import AnyUrl

from toolmesh_gateway.authorization_server.addresses import endpoint_path, resource_path
from toolmesh_gateway.authorization_server.clients import GatewayClient, is_document_url

BASE = "https://gw.example:8443"


@pytest.mark.parametrize(
    ("resource", "endpoint"),
    [
        (f"{BASE}/mcp", "/mcp"),
        (f"{BASE}/mcp/", "/mcp"),
        (f"{BASE}/mcp/dev", "/mcp/dev"),
        ("https://GW.example:8443/mcp/dev", "/mcp/dev"),
        ("https://gw.example/mcp", None),  # another port
        ("http://gw.example:8443/mcp", None),  # another scheme
        ("https://user@gw.example:8443/mcp", None),
        ("https://gw.example:8443.evil.example/mcp", None),
        (f"{BASE}/mcp?namespace=b", None),
        (f"{BASE}/mcp#x", None),
        (f"{BASE}/mcp/a/b", None),
        (f"{BASE}/mcp/../api/v1", None),
        (f"{BASE}/mcpx", None),
        (f"{BASE}/api/v1/aggregator/servers", None),
        (f"{BASE}/mcp/" + "x" * 129, None),
    ],
)
def test_a_resource_names_an_endpoint_of_this_gateway_only(resource: str, endpoint: str | None) -> None:
    assert resource_path(resource, BASE) == endpoint


def test_an_endpoint_path_is_mcp_or_one_name_under_it() -> None:
    assert [endpoint_path(p) for p in ("/mcp", "/mcp/", "/mcp/a.b-c_d", "/mcp/a/b", "/mcp/a b", "/")] == [
        "/mcp",
        "/mcp",
        "/mcp/a.b-c_d",
        None,
        None,
        None,
    ]


@pytest.mark.parametrize(
    ("client_id", "is_document"),
    [
        ("https://app.example/oauth/client.json", True),
        ("https://app.example/", False),
        ("https://app.example", False),
        ("http://app.example/client.json", False),
        ("3f1c2b0e-uuid-like", False),
    ],
)
def test_a_client_id_is_a_document_url_when_https_with_a_path(client_id: str, is_document: bool) -> None:
    assert is_document_url(client_id) is is_document


def _client(*uris: str) -> GatewayClient:
    return GatewayClient(client_id="c", redirect_uris=[AnyUrl(u) for u in uris])


@pytest.mark.parametrize("uri", ["http://127.0.0.1:1234/cb", "http://127.0.0.1/cb", "http://127.0.0.1:65535/cb"])
def test_a_loopback_redirect_uri_may_change_its_port(uri: str) -> None:
    assert str(_client("http://127.0.0.1:33418/cb").validate_redirect_uri(AnyUrl(uri))) == uri


@pytest.mark.parametrize(
    "uri",
    [
        "http://127.0.0.1:1234/other",
        "http://127.0.0.1:1234/cb/",
        "http://127.0.0.1:1234/cb?x=1",
        "http://127.0.0.2:1234/cb",
        "http://localhost:1234/cb",
        "https://127.0.0.1:1234/cb",
        "http://evil.example:33418/cb",
    ],
)
def test_a_loopback_redirect_uri_may_change_nothing_else(uri: str) -> None:
    with pytest.raises(InvalidRedirectUriError):
        _client("http://127.0.0.1:33418/cb").validate_redirect_uri(AnyUrl(uri))


def test_a_localhost_redirect_uri_may_change_its_port_too() -> None:
    """Many desktop clients register ``http://localhost:<port>/...`` (RFC 8252 §8.3 discourages it,
    but it is loopback all the same): its port may change, its host may not become an address."""
    client = _client("http://localhost:33418/callback")
    uri = "http://localhost:50123/callback"
    assert str(client.validate_redirect_uri(AnyUrl(uri))) == uri
    with pytest.raises(InvalidRedirectUriError):
        client.validate_redirect_uri(AnyUrl("http://127.0.0.1:50123/callback"))


def test_a_non_loopback_redirect_uri_must_match_exactly() -> None:
    client = _client("https://app.example/cb")
    with pytest.raises(InvalidRedirectUriError):
        client.validate_redirect_uri(AnyUrl("https://app.example:444/cb"))
    assert str(client.validate_redirect_uri(AnyUrl("https://app.example/cb"))) == "https://app.example/cb"
