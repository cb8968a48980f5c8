"""Secrets written inside command-line arguments: what ``masked_config`` hides and the redactor learns."""

from __future__ import annotations

import pytest

from toolmesh.secret_text import args_secrets, is_secret_name, mask_args, mask_url


@pytest.mark.parametrize(
    ("args", "masked"),
    [
        (["--api-key", "abc123"], ["--api-key", "***"]),
        (["--api-key=abc123"], ["--api-key=***"]),
        (["--token", "t"], ["--token", "***"]),
        (["--password=hunter2"], ["--password=***"]),
        (["-e", "GITHUB_TOKEN=ghp_x"], ["-e", "GITHUB_TOKEN=***"]),
        (["TOKEN=abc"], ["TOKEN=***"]),
        (["--header", "Authorization: Bearer abc.def"], ["--header", "Authorization: ***"]),
        (["--header=X-API-Key: k"], ["--header=X-API-Key: ***"]),
        (["Bearer abc.def"], ["Bearer ***"]),
        (["postgresql://app:pw@db:5432/app"], ["postgresql://***@db:5432/app"]),
        (["--url=https://h/mcp?key=v"], ["--url=https://h/mcp?***"]),
        (["sh", "-c", "node srv.js --api-key abc TOKEN=x"], ["sh", "-c", "node srv.js --api-key *** TOKEN=***"]),
        (["--config", '{"apiKey": "abc", "port": 1}'], ["--config", '{"apiKey": "***", "port": 1}']),
        (["serve", "tmo_" + "a" * 43], ["serve", "***"]),
        (["serve", "tmr_" + "b" * 43], ["serve", "***"]),
    ],
)
def test_secrets_in_args_are_masked(args: list[str], masked: list[str]) -> None:
    assert mask_args(args) == masked


@pytest.mark.parametrize(
    "args",
    [
        ["server.js", "--port", "8080", "--verbose"],
        ["--key-file", "/etc/tls/key.pem"],  # the value of a *-file flag is a path
        ["--monkey", "banana", "MODE=stdio"],
        ["--no-token", "--name", "demo"],  # a secret-named flag followed by another flag has no value
        ["https://example.com/mcp", "Note: nothing secret"],
    ],
)
def test_ordinary_args_are_left_alone(args: list[str]) -> None:
    assert mask_args(args) == args


def test_args_secrets_name_every_masked_value() -> None:
    found = {
        (s.value, s.name)
        for s in args_secrets(
            ["--api-key", "k1", "--token=k2", "PASS=k3", "Authorization: Bearer k4", "https://u:k5@h/?sig=k6"]
        )
    }
    assert {("k1", "--api-key"), ("k2", "--token"), ("k3", "PASS"), ("Bearer k4", "Authorization")} <= found
    assert {("k4", "Bearer"), ("k5", "password"), ("k6", "sig")} <= found


def test_secret_names_are_read_word_by_word() -> None:
    assert all(is_secret_name(n) for n in ("GITHUB_TOKEN", "X-API-Key", "clientSecret", "DB_PASSWORD", "Cookie"))
    assert not any(is_secret_name(n) for n in ("MONKEY", "KEYBOARD", "PATH", "PORT", "author"))
    assert is_secret_name("--api-key", last_word=True) and not is_secret_name("--key-file", last_word=True)


def test_mask_url_hides_the_user_info_and_the_query() -> None:
    assert mask_url("https://user:pw@[::1]:8443/mcp?key=s") == "https://***@[::1]:8443/mcp?***"
    assert mask_url("https://ghp_token@github.com/org/repo") == "https://***@github.com/org/repo"
    assert mask_url("https://h/mcp") == "https://h/mcp"
