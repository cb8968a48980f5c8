"""Upstream hygiene: TLS for remote upstreams, no toolmesh variables in a server's config or
environment."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types as mcp_types
from pydantic import ValidationError

from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.credentials import expand_env
from toolmesh.platform.config import Settings
from toolmesh.storable import has_nul, storable
from toolmesh_session_worker.discovery import ToolLimits, tools_snapshot
from toolmesh_session_worker.upstream.stdio import base_environment


def _register(transport: str, config: dict[str, Any], **fields: Any) -> RegisterServerRequest:
    body = {"name": "remote", "transport_type": transport, "connection_config": config, **fields}
    return RegisterServerRequest.model_validate(body)


@pytest.mark.parametrize(
    ("transport", "field", "url"),
    [("SSE", "url", "http://mcp.example.com/sse"), ("HTTP", "base_url", "http://10.0.0.5:8080/mcp")],
)
def test_plain_http_on_a_remote_host_is_refused_naming_the_rule(transport: str, field: str, url: str) -> None:
    with pytest.raises(ValidationError) as raised:
        _register(transport, {field: url})
    (error,) = raised.value.errors()
    assert error["loc"] == ("connection_config", field)
    assert "https://" in error["msg"] and '"allow_insecure": true' in error["msg"]


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.example.com/sse",
        "http://127.0.0.1:9/sse",
        "http://127.8.9.10/sse",
        "http://[::1]:9/sse",
        "http://localhost:9/sse",
        "HTTPS://MCP.EXAMPLE.COM/sse",
    ],
)
def test_https_and_loopback_upstreams_are_accepted(url: str) -> None:
    assert _register("SSE", {"url": url}).connection_config["url"] == url


def test_allow_insecure_accepts_plain_http_explicitly() -> None:
    request = _register("SSE", {"url": "http://mcp.internal/sse"}, allow_insecure=True)
    assert request.allow_insecure is True


def test_health_check_url_follows_the_same_rule() -> None:
    with pytest.raises(ValidationError) as raised:
        _register("SSE", {"url": "https://h/sse"}, health_check_url="http://h/health")
    assert [e["loc"] for e in raised.value.errors()] == [("health_check_url",)]
    assert _register("SSE", {"url": "https://h/sse"}, health_check_url="http://127.0.0.1:1/health")
    assert _register("SSE", {"url": "http://h/sse"}, health_check_url="http://h/health", allow_insecure=True)


@pytest.mark.parametrize(
    "variable",
    [
        "MCP_CREDENTIAL_KEY",
        "MCP_CREDENTIAL_KEY_PREVIOUS",
        "mcp_credential_key_previous",
        "TOOLMESH_ADMIN_TOKEN",
        "toolmesh_admin_token",
        "Toolmesh_Database_Url",
        "mcp_aggregator_max_servers",
        "PGPASSWORD",
    ],
)
def test_a_config_may_not_reference_toolmesh_variables(variable: str) -> None:
    with pytest.raises(ValidationError) as raised:
        _register("STDIO", {"command": "srv", "env": {"K": f"x${{{variable}}}"}})
    (error,) = raised.value.errors()
    assert error["loc"] == ("connection_config", "env") and variable in error["msg"]


def test_expansion_never_reads_toolmesh_variables() -> None:
    environ = {"MCP_CREDENTIAL_KEY": "k", "TOOLMESH_ADMIN_TOKEN": "t", "GITHUB_TOKEN": "g"}
    config = {"args": ["${MCP_CREDENTIAL_KEY}", "${TOOLMESH_ADMIN_TOKEN}", "${GITHUB_TOKEN}"]}
    assert expand_env(config, environ) == {"args": ["", "", "g"]}


def test_stdio_servers_inherit_only_the_named_base_variables() -> None:
    environ = {"PATH": "/bin", "HOME": "/home/u", "MCP_CREDENTIAL_KEY": "k", "TOOLMESH_NATS_URL": "nats://x"}
    assert base_environment(Settings().stdio_base_env, environ) == {"PATH": "/bin", "HOME": "/home/u"}


def test_base_env_and_origins_read_as_comma_lists_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLMESH_STDIO_BASE_ENV", "PATH, HOME,NODE_EXTRA_CA_CERTS")
    monkeypatch.setenv("TOOLMESH_ALLOWED_ORIGINS", '["https://app.example.com"]')
    settings = Settings()
    assert settings.stdio_base_env == ("PATH", "HOME", "NODE_EXTRA_CA_CERTS")
    assert settings.allowed_origins == ("https://app.example.com",)


def test_an_upstream_tool_list_loses_its_nul_characters() -> None:
    tool = mcp_types.Tool(
        name="tool", description="d\x00", input_schema={"type": "object", "properties": {"a\x00": {}}}
    )
    named = mcp_types.Tool(name="to\x00ol", input_schema={"type": "object"})  # a name breaking the MCP rule
    snapshot = tools_snapshot("id", "srv", "default", [tool, named], ToolLimits(10, 100, 1000))
    (found,) = snapshot.tools
    assert (found.original_name, found.description, snapshot.left_out) == ("tool", "d", 1)
    assert found.input_schema == {"type": "object", "properties": {"a": {}}}


def test_nul_is_found_and_removed_anywhere_in_a_value() -> None:
    value = {"k\x00": ["a", {"b": "c\x00"}], "n": 1}
    assert has_nul(value) and not has_nul(storable(value))
    assert storable(value) == {"k": ["a", {"b": "c"}], "n": 1}
