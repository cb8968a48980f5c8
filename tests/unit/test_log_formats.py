"""Log formats: JSON for machines, short lines for a person at a terminal; secrets masked in both."""

from __future__ import annotations

import io
import json
import logging
import os
import pty
import secrets
from collections.abc import Iterator
from typing import TextIO

import pytest
from pydantic import ValidationError

from toolmesh.platform.config import Settings
from toolmesh.platform.log_formats import chosen_format
from toolmesh.platform.telemetry import configure_logging
from toolmesh.redaction import process_redactor

pytestmark = pytest.mark.unit


@pytest.fixture
def terminal() -> Iterator[TextIO]:
    """The writing end of a real pseudo-terminal."""
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as stream:
        yield stream
    os.close(leader)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put the root logger back as the test found it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_auto_is_human_on_a_terminal_and_json_elsewhere(terminal: TextIO) -> None:
    assert chosen_format("auto", terminal) == "human"
    assert chosen_format("auto", io.StringIO()) == "json"


def test_an_explicit_format_wins_over_the_terminal(terminal: TextIO) -> None:
    assert chosen_format("json", terminal) == "json"
    assert chosen_format("human", io.StringIO()) == "human"


def test_settings_read_the_log_format_and_level(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (Settings().log_format, Settings().log_level) == ("auto", "INFO")
    monkeypatch.setenv("TOOLMESH_LOG_FORMAT", "JSON")
    monkeypatch.setenv("TOOLMESH_LOG_LEVEL", "debug")
    assert (Settings().log_format, Settings().log_level) == ("json", "DEBUG")
    monkeypatch.setenv("TOOLMESH_LOG_FORMAT", "text")  # the earlier name of the human format
    assert Settings().log_format == "human"
    monkeypatch.setenv("TOOLMESH_LOG_FORMAT", "xml")
    with pytest.raises(ValidationError, match="log_format"):
        Settings()
    monkeypatch.setenv("TOOLMESH_LOG_FORMAT", "auto")
    monkeypatch.setenv("TOOLMESH_LOG_LEVEL", "loud")
    with pytest.raises(ValidationError, match="log_level"):
        Settings()


@pytest.mark.usefixtures("restore_logging")
def test_json_lines_when_the_stream_is_not_a_terminal() -> None:
    output = io.StringIO()
    configure_logging("INFO", stream=output)
    logging.getLogger("toolmesh.gateway").info("listening", extra={"server": "demo"})
    logging.getLogger("uvicorn.error").info("Started server process")
    records = [json.loads(line) for line in output.getvalue().splitlines()]
    assert [(r["logger"], r["msg"]) for r in records] == [
        ("toolmesh.gateway", "listening"),
        ("uvicorn.error", "Started server process"),
    ]
    assert records[0]["server"] == "demo"


@pytest.mark.usefixtures("restore_logging")
def test_human_lines_are_short_and_quiet_about_other_libraries() -> None:
    output = io.StringIO()
    configure_logging("INFO", stream=output, log_format="human")
    logging.getLogger("toolmesh.gateway").info("HTTP API listening on %s", "http://127.0.0.1:8081")
    logging.getLogger("toolmesh.session").info("connected", extra={"server": "demo"})
    logging.getLogger("toolmesh.store").debug("applied migration 0001_schema.sql")
    logging.getLogger("uvicorn.error").info("Started server process")
    logging.getLogger("mcp.server.streamable_http_manager").info("StreamableHTTP session manager started")
    noisy = logging.getLogger("faststream_api")
    noisy.setLevel(logging.DEBUG)  # as faststream sets it: the handler still keeps its chatter out
    noisy.info("callback for Task-1 is being executed...")
    logging.getLogger("asyncpg").warning("connection lost")
    lines = output.getvalue().splitlines()
    assert [line.split(maxsplit=3)[1:] for line in lines] == [
        ["INFO", "gateway", "HTTP API listening on http://127.0.0.1:8081"],
        ["INFO", "session", "connected  server=demo"],
        ["WARNING", "asyncpg", "connection lost"],
    ]
    assert not any(line.startswith("{") for line in lines)


@pytest.mark.usefixtures("restore_logging")
def test_human_format_masks_secrets_in_messages_and_tracebacks() -> None:
    secret = f"sk-{secrets.token_hex(16)}"
    process_redactor().add([secret])
    output = io.StringIO()
    configure_logging("INFO", stream=output, log_format="human")
    log = logging.getLogger("toolmesh.upstream")
    log.warning("upstream refused key %s", secret)
    try:
        raise ConnectionError(f"401 for Authorization: Bearer {secret}")
    except ConnectionError:
        log.exception("connect failed")
    text = output.getvalue()
    assert secret not in text
    assert "upstream refused key ***" in text
    assert "ConnectionError: 401 for Authorization: Bearer ***" in text


@pytest.mark.usefixtures("restore_logging")
def test_human_lines_carry_no_terminal_control_and_forge_no_line() -> None:
    output = io.StringIO()
    configure_logging("INFO", stream=output, log_format="human")
    hostile = "clear\x1b[2J\x1b]0;owned\x07\n12:00:00 INFO    gateway  admin token accepted"
    logging.getLogger("toolmesh.upstream").info("%s", hostile, extra={"server": "demo\x1b[31m"})
    text = output.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert text.splitlines() == [
        text.splitlines()[0].split(" ", 1)[0] + " INFO    upstream  clear\\x1b[2J\\x1b]0;owned\\x07",
        "    12:00:00 INFO    gateway  admin token accepted  server=demo\\x1b[31m",
    ]
