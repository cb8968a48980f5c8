"""Who may register what: STDIO servers are for owners and admins (and the deployment's commands);
``${VAR}`` is deny-by-default and never reaches toolmesh's own variables or the worker's secrets."""

from __future__ import annotations

from typing import Any

import pytest

from toolmesh.contracts.connection_config import TransportType
from toolmesh.contracts.keys import Role
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.errors import Forbidden, ValidationFailed
from toolmesh.platform.config import Settings
from toolmesh.registration_policy import check_registration, worker_environment


def _request(transport: str, config: dict[str, Any]) -> RegisterServerRequest:
    return RegisterServerRequest(name="s", transport_type=TransportType(transport), connection_config=config)


def _settings(**values: Any) -> Settings:
    return Settings(**values)


@pytest.mark.parametrize("role", [Role.AGENT, Role.USER])
def test_running_a_command_on_a_host_is_refused_to_agents_and_users(role: Role) -> None:
    request = _request("STDIO", {"command": "/bin/sh", "args": ["-c", "touch /tmp/x"]})
    with pytest.raises(Forbidden) as raised:
        check_registration(request, role, "default", _settings())
    assert raised.value.status == 403 and raised.value.context == {
        "role": str(role),
        "action": "register STDIO servers",
    }


@pytest.mark.parametrize("role", [Role.OWNER, Role.ADMIN])
def test_owners_and_admins_run_any_command_when_the_deployment_lists_none(role: Role) -> None:
    check_registration(_request("STDIO", {"command": "/bin/sh"}), role, "default", _settings())


def test_agents_still_register_remote_servers() -> None:
    check_registration(_request("HTTP", {"base_url": "https://h/mcp"}), Role.AGENT, "default", _settings())


def test_a_command_outside_the_deployment_list_is_refused_naming_the_field() -> None:
    settings = _settings(stdio_commands=("npx", "/opt/mcp/*"))
    check_registration(_request("STDIO", {"command": "npx"}), Role.ADMIN, "default", settings)
    check_registration(_request("STDIO", {"command": "/opt/mcp/srv"}), Role.ADMIN, "default", settings)
    with pytest.raises(ValidationFailed) as raised:
        check_registration(_request("STDIO", {"command": "/bin/sh"}), Role.OWNER, "default", settings)
    assert [e["loc"] for e in raised.value.context["errors"]] == [["connection_config", "command"]]


def test_no_variable_may_be_named_unless_the_deployment_allows_it() -> None:
    request = _request("HTTP", {"base_url": "https://h/mcp", "headers": {"X": "${SOME_WORKER_VAR}"}})
    with pytest.raises(ValidationFailed) as raised:
        check_registration(request, Role.ADMIN, "default", _settings())
    (error,) = raised.value.context["errors"]
    assert error["loc"] == ["connection_config", "headers"] and "SOME_WORKER_VAR" in error["msg"]
    check_registration(request, Role.ADMIN, "default", _settings(expandable_variables=("SOME_*",)))


def test_a_namespace_allow_list_widens_only_that_namespace() -> None:
    settings = _settings(expandable_variables_by_namespace={"team-a": ("JIRA_*",)})
    request = _request("HTTP", {"base_url": "https://h/mcp", "headers": {"X": "${JIRA_TOKEN}"}})
    check_registration(request, Role.ADMIN, "team-a", settings)
    with pytest.raises(ValidationFailed):
        check_registration(request, Role.ADMIN, "team-b", settings)


def test_worker_environment_keeps_only_allowed_variables_without_secrets() -> None:
    settings = _settings(
        expandable_variables=("*",),
        admin_token="owner-token-123",
        database_url="postgresql://u:db-pass-456@h/db",
    )
    environ = {
        "GITHUB_TOKEN": "gh",
        "MCP_CREDENTIAL_KEY_PREVIOUS": "old",
        "toolmesh_admin_token": "x",
        "COPY_OF_TOKEN": "owner-token-123",  # a secret of the worker under another name
        "DSN": "postgresql://u:db-pass-456@h/db",
    }
    assert worker_environment(environ, settings, "default") == {"GITHUB_TOKEN": "gh"}
    assert worker_environment(environ, _settings(), "default") == {}
