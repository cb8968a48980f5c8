"""Contracts: BR-001 validation, namespacing (EC-002), the error table, event decoding."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolmesh.contracts.event_types import EVENT_TYPES, decode_event
from toolmesh.contracts.events import ServerRemoved
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.errors import ERROR_TYPES, ServerUnavailable, error_from_body
from toolmesh.naming import namespace_tool, split_namespaced


def _request(**fields: object) -> RegisterServerRequest:
    body = {"name": "github-mcp", "transport_type": "SSE", "connection_config": {"url": "https://h/sse"}}
    return RegisterServerRequest.model_validate({**body, **fields})


def test_br001_valid_registration() -> None:
    assert _request().auto_connect is True


@pytest.mark.parametrize(
    ("transport", "config", "loc"),
    [
        ("SSE", {}, ("connection_config", "url")),
        ("HTTP", {"url": "https://h"}, ("connection_config", "base_url")),
        ("STDIO", {"args": []}, ("connection_config", "command")),
        ("STDIO", {"command": "x", "args": "not-a-list"}, ("connection_config", "args")),
        ("SSE", {"url": "ftp://h"}, ("connection_config", "url")),
        ("SSE", {"url": "https://h", "headers": {"a": 1}}, ("connection_config", "headers")),
    ],
)
def test_br001_transport_config_errors_name_the_field(transport: str, config: dict, loc: tuple) -> None:
    with pytest.raises(ValidationError) as raised:
        _request(transport_type=transport, connection_config=config)
    assert raised.value.errors()[0]["loc"] == loc


@pytest.mark.parametrize("name", ["Upper", "1abc", "has space", "", "a" * 256, "dot.name"])
def test_br001_invalid_names(name: str) -> None:
    with pytest.raises(ValidationError):
        _request(name=name)


def test_ec002_first_dot_splits() -> None:
    assert namespace_tool("server-a", "api.v2.create") == "server-a.api.v2.create"
    assert split_namespaced("server-a.api.v2.create") == ("server-a", "api.v2.create")
    assert split_namespaced("plain") is None


def test_error_table_matches_the_contract() -> None:
    expected = {
        "SERVER_NOT_FOUND": 404,
        "SERVER_ALREADY_EXISTS": 409,
        "SERVER_UNAVAILABLE": 503,
        "SERVER_CONNECTION_FAILED": 503,
        "TOOL_NOT_FOUND": 404,
        "TOOL_AMBIGUOUS": 400,
        "SESSION_NOT_FOUND": 503,
        "ROUTING_FAILED": 500,
        "EXECUTION_FAILED": 502,
        "HEALTH_CHECK_FAILED": 503,
        "CLASSIFICATION_FAILED": 500,
    }
    assert {code: ERROR_TYPES[code].status for code in expected} == expected


def test_errors_cross_processes_intact() -> None:
    error = ServerUnavailable("Server unavailable: x", {"a": 1}, server={"id": "1", "name": "x", "status": "ERROR"})
    again = error_from_body(error.body())
    assert type(again) is ServerUnavailable and again.body() == error.body()


def test_events_decode_by_subject_and_unknown_subjects_are_none() -> None:
    event = ServerRemoved(server_id="s", name="x")
    assert decode_event(event.subject, event.model_dump_json().encode()) == event
    assert decode_event("toolmesh.evt.future.thing", b"{}") is None
    assert all(subject.startswith("toolmesh.evt.") for subject in EVENT_TYPES)
