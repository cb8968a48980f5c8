"""Credentials: sealing, ${VAR} expansion, masking and the log redactor."""

from __future__ import annotations

import io
import logging

import pytest

from toolmesh.credentials import CredentialBox, expand_env, hash_token, mask_config, new_key, secret_values
from toolmesh.redaction import SecretRedactor


def test_sealed_config_round_trips_and_hides_its_content() -> None:
    box = CredentialBox(new_key())
    config = {"url": "https://x/sse", "headers": {"Authorization": "Bearer abcdef123"}}
    sealed = box.seal(config)
    assert "abcdef123" not in sealed
    assert box.open(sealed) == config


def test_a_different_key_cannot_open() -> None:
    sealed = CredentialBox("one key").seal({"a": "b"})
    with pytest.raises(Exception):  # noqa: B017 - cryptography's InvalidTag
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
        "base_url": "https://user:***@host:8443/mcp?***",
        "headers": {"Authorization": "***"},
        "env": {"TOKEN": "***"},
        "command": "node",
        "api_key": "***",
    }


def test_secret_values_collects_what_must_not_be_logged() -> None:
    values = secret_values(
        {"url": "https://u:password1@h/sse?token=querysecret", "headers": {"Authorization": "Bearer bearer-secret"}}
    )
    assert {"password1", "querysecret", "bearer-secret", "Bearer bearer-secret"} <= set(values)
    assert secret_values({"env": {"SHORT": "abc"}}) == []  # too short to mask safely


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
