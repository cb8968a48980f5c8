"""``connection_config.auth`` (issue 25): validated, both identities accepted, secrets masked."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.credentials import mask_config, secret_values


def _register(transport: str, auth: object) -> RegisterServerRequest:
    field = "base_url" if transport == "HTTP" else "url"
    return RegisterServerRequest(
        name="saas", transport_type=transport, connection_config={field: "https://mcp.example.com/mcp", "auth": auth}
    )


@pytest.mark.parametrize("transport", ["HTTP", "SSE", "REST"])
@pytest.mark.parametrize("identity", ["shared", "per_user"])
def test_oauth_identities_are_accepted(transport: str, identity: str) -> None:
    request = _register(transport, {"mode": "oauth", "identity": identity, "scopes": ["read"], "client_id": "c"})
    assert request.connection_config["auth"]["scopes"] == ["read"]
    assert request.connection_config["auth"]["identity"] == identity


@pytest.mark.parametrize(
    "auth",
    [
        {"mode": "basic"},
        {"mode": "oauth", "extra": 1},
        {"mode": "oauth", "client_secret": "s"},
        {"mode": "oauth", "token_endpoint_auth_method": "client_secret_post"},
        {"mode": "oauth", "client_id": "c", "token_endpoint_auth_method": "private_key_jwt"},
        {"mode": "oauth", "scopes": ["two words"]},
        {"mode": "oauth", "identity": "per_principal"},
        {"mode": "oauth", "identity": "per_user", "client_id": "c", "token_exchange": {}},
        {"mode": "oauth", "identity": "shared", "client_id": "c", "token_exchange": {"token_endpoint": "https://a/t"}},
        {"mode": "oauth", "identity": "per_user", "token_exchange": {"token_endpoint": "https://a/t"}},
        "oauth",
    ],
)
def test_unusable_auth_is_refused(auth: object) -> None:
    with pytest.raises(ValidationError):
        _register("HTTP", auth)


def test_auth_is_only_for_network_transports() -> None:
    with pytest.raises(ValidationError):
        RegisterServerRequest(
            name="local", transport_type="STDIO", connection_config={"command": "x", "auth": {"mode": "oauth"}}
        )


def test_client_secret_is_masked_and_redacted() -> None:
    config = {"base_url": "https://x/mcp", "auth": {"mode": "oauth", "client_id": "c", "client_secret": "s3cr3t-val"}}
    assert mask_config(config)["auth"] == {"mode": "oauth", "client_id": "c", "client_secret": "***"}
    assert "s3cr3t-val" in {secret.value for secret in secret_values(config)}


def test_token_exchange_names_its_token_endpoint() -> None:
    """The callers' tokens go only where the registration says, never where the upstream points."""
    auth = {
        "mode": "oauth",
        "identity": "per_user",
        "client_id": "c",
        "token_exchange": {"token_endpoint": "https://idp/t"},
    }
    assert _register("HTTP", auth).connection_config["auth"]["token_exchange"]["token_endpoint"] == "https://idp/t"


def test_an_openapi_server_takes_an_oauth_auth_member_naming_its_scheme() -> None:
    spec = {"spec_url": "https://api.example.com/openapi.json"}
    auth = {"mode": "oauth", "identity": "per_user", "scheme": "petstore_auth"}
    config = {**spec, "auth": auth}
    registered = RegisterServerRequest(name="api", transport_type="OPENAPI", connection_config=config)
    assert registered.connection_config["auth"]["scheme"] == "petstore_auth"
    with pytest.raises(ValidationError) as raised:
        bad = {**spec, "auth": {"mode": "oauth", "scheme": ""}}
        RegisterServerRequest(name="api", transport_type="OPENAPI", connection_config=bad)
    assert [e["loc"] for e in raised.value.errors()] == [("connection_config", "auth")]
