"""Credentials: sealing, ${VAR} expansion, masking and the log redactor."""

from __future__ import annotations

import io
import logging

import pytest
from cryptography.exceptions import InvalidTag

from toolmesh.credentials import (
    CredentialBox,
    expand_env,
    expandable_environment,
    hash_token,
    mask_config,
    new_key,
    secret_values,
)
from toolmesh.redaction import SecretRedactor


def test_sealed_config_round_trips_and_hides_its_content() -> None:
    box = CredentialBox(new_key())
    config = {"url": "https://x/sse", "headers": {"Authorization": "Bearer abcdef123"}}
    sealed = box.seal(config)
    assert "abcdef123" not in sealed
    assert box.open(sealed) == config


def test_a_different_key_cannot_open() -> None:
    sealed = CredentialBox("one key").seal({"a": "b"})
    with pytest.raises(InvalidTag):
        CredentialBox("another key").open(sealed)


def test_expand_env_replaces_variables_everywhere() -> None:
    config = {"command": "run", "args": ["--token", "${TOKEN}"], "env": {"A": "x-${TOKEN}-${MISSING}"}}
    assert expand_env(config, {"TOKEN": "t0k"}) == {
        "command": "run",
        "args": ["--token", "t0k"],
        "env": {"A": "x-t0k-"},
    }


def test_mask_config_hides_headers_env_and_url_secrets() -> None:
    masked = mask_config(
        {
            "base_url": "https://user:pw@host:8443/mcp?key=secret",
            "headers": {"Authorization": "Bearer abc"},
            "env": {"TOKEN": "x"},
            "command": "node",
            "api_key": "k",
        }
    )
    assert masked == {
        "base_url": "https://***@host:8443/mcp?***",
        "headers": {"Authorization": "***"},
        "env": {"TOKEN": "***"},
        "command": "node",
        "api_key": "***",
    }


def test_secret_values_collects_what_must_not_be_logged() -> None:
    values = secret_values(
        {"url": "https://u:password1@h/sse?token=querysecret", "headers": {"Authorization": "Bearer bearer-secret"}}
    )
    assert {"password1", "querysecret", "bearer-secret", "Bearer bearer-secret"} <= {s.value for s in values}


def test_secret_values_names_short_values_so_they_are_masked_in_context_only() -> None:
    (secret,) = secret_values({"env": {"MODE": "abc"}})
    assert (secret.value, secret.name, secret.sensitive) == ("abc", "MODE", False)
    (secret,) = secret_values({"env": {"API_TOKEN": "abc"}})
    assert (secret.value, secret.name, secret.sensitive) == ("abc", "API_TOKEN", True)


def test_secret_values_include_secrets_written_in_args() -> None:
    values = secret_values({"command": "srv", "args": ["--api-key", "k3y", "--password=pw9", "GH_TOKEN=ghp"]})
    assert {("k3y", "--api-key"), ("pw9", "--password"), ("ghp", "GH_TOKEN")} <= {(s.value, s.name) for s in values}


def test_mask_config_hides_secrets_written_in_args() -> None:
    config = {"command": "srv", "args": ["--api-key", "k3y", "--port", "8080", "--token=t0k"]}
    assert mask_config(config)["args"] == ["--api-key", "***", "--port", "8080", "--token=***"]


def test_redactor_masks_messages_and_tracebacks_of_any_logger() -> None:
    redactor = SecretRedactor()
    redactor.add(["hunter22"])
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(redactor)
    logger = logging.getLogger("some.library")
    logger.addHandler(handler)
    try:
        logger.warning("connecting with %s", "hunter22")
        try:
            raise ValueError("bad token hunter22")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    assert "hunter22" not in stream.getvalue()
    assert "connecting with ***" in stream.getvalue()


def test_tokens_are_stored_hashed() -> None:
    assert hash_token("abc") != "abc" and len(hash_token("abc")) == 64


def test_a_rotated_box_opens_old_tokens_and_seals_under_the_new_key() -> None:
    old = CredentialBox("old key")
    sealed = old.seal({"env": {"T": "secret"}})
    rotated = CredentialBox("new key", ["old key"])
    assert rotated.open(sealed) == {"env": {"T": "secret"}}
    assert not rotated.is_current(sealed) and old.is_current(sealed)
    resealed = rotated.seal(rotated.open(sealed))
    assert rotated.is_current(resealed) and resealed.startswith(rotated.key_id + ":")
    with pytest.raises(InvalidTag):
        CredentialBox("new key").open(sealed)  # without the previous key, the old token is unreadable


def test_tokens_sealed_before_key_ids_still_open() -> None:
    box = CredentialBox("k")
    legacy = box.seal({"a": 1}).partition(":")[2]  # the format before key ids: the base64 body alone
    assert box.open(legacy) == {"a": 1} and not box.is_current(legacy)
    assert CredentialBox("other", ["k"]).open(legacy) == {"a": 1}


def test_only_allowed_variables_expand() -> None:
    environ = {"GITHUB_TOKEN": "gh", "AWS_SECRET_ACCESS_KEY": "aws", "SLACK_TOKEN": "sl"}
    allowed = expandable_environment(environ, ["GITHUB_*", "SLACK_TOKEN"])
    config = {"env": {"A": "${GITHUB_TOKEN}", "B": "${AWS_SECRET_ACCESS_KEY}", "C": "${SLACK_TOKEN}"}}
    assert expand_env(config, allowed) == {"env": {"A": "gh", "B": "", "C": "sl"}}
    assert expandable_environment(environ, ["*"]) == environ
    own = {"MCP_CREDENTIAL_KEY_PREVIOUS": "old", "toolmesh_admin_token": "t", "Mcp_Credential_Key": "k"}
    assert expandable_environment({**environ, **own}, ["*"]) == environ  # toolmesh's own never, in any case
