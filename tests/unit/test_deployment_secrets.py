"""The redactor knows the deployment's own secrets, and API key tokens by their form."""

from __future__ import annotations

import secrets

import pytest

from toolmesh.contracts.keys import KEY_TOKEN_PATTERN, KEY_TOKEN_PREFIX
from toolmesh.platform.config import Settings
from toolmesh.platform.deployment_secrets import deployment_secrets
from toolmesh.redaction import SecretRedactor


def _values(settings: Settings, environ: dict[str, str]) -> set[str]:
    return {secret.value for secret in deployment_secrets(settings, environ)}


def test_the_owner_token_credential_keys_and_backend_passwords_are_secrets() -> None:
    settings = Settings(
        admin_token="owner-token-1",
        credential_key="current-key-1",
        credential_previous_keys="old-key-1, old-key-2",
        database_url="postgresql://toolmesh:db-password@db:5432/toolmesh",
        nats_url="nats://svc:nats-password@nats:4222",
        metrics_token="metrics-token-1",
    )
    found = _values(settings, {})
    expected = {"owner-token-1", "current-key-1", "old-key-1", "old-key-2", "db-password", "nats-password"}
    assert expected | {"metrics-token-1"} <= found
    assert "toolmesh" not in found and "svc" not in found  # user names are not secrets


def test_secret_named_variables_are_secrets_and_numbers_and_paths_are_not() -> None:
    environ = {
        "MCP_CREDENTIAL_KEY_PREVIOUS": "prev-a,prev-b",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-1",
        "TOOLMESH_AUTH_FAILURE_LIMIT": "10",
        "HOME": "/home/toolmesh",
        "UPSTREAM_URL": "https://bot:url-password@example.com/mcp",
    }
    found = _values(Settings(), environ)
    assert {"prev-a", "prev-b", "aws-secret-1", "url-password"} <= found
    assert "10" not in found and "/home/toolmesh" not in found


def test_an_api_key_token_is_masked_by_its_form_alone() -> None:
    redactor = SecretRedactor()
    redactor.add_shape(KEY_TOKEN_PATTERN)
    token = KEY_TOKEN_PREFIX + secrets.token_urlsafe(32)
    line = f"child said: Authorization: Bearer {token}; token={token}."
    assert token not in redactor.redact(line)
    assert redactor.redact("tm_short and stm_" + "x" * 43) == "tm_short and stm_" + "x" * 43


@pytest.mark.parametrize("prefix", ["tmo_", "tmr_"])
def test_an_oauth_token_of_the_gateway_is_masked_by_its_form_alone(prefix: str) -> None:
    redactor = SecretRedactor()
    redactor.add_shape(KEY_TOKEN_PATTERN)
    token = prefix + secrets.token_urlsafe(32)
    assert token not in redactor.redact(f"refresh_token={token}&client_id=c")
    assert redactor.redact("tmx_" + "y" * 43) == "tmx_" + "y" * 43


def test_the_shells_working_directory_is_no_password() -> None:
    """``PWD`` reads as a password's name; masked, it hid every path under the working directory in the log."""
    found = _values(Settings(), {"PWD": "/srv/toolmesh", "OLDPWD": "/home/ops", "DB_PWD": "pw-1"})
    assert "/srv/toolmesh" not in found and "/home/ops" not in found
    assert "pw-1" in found
