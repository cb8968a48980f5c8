"""Contracts of REST tool servers, categories on discovered tools, the domain events, and the
ownership rule of the ``agent`` role."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from toolmesh.categories import ToolCategory
from toolmesh.contracts.event_types import decode_event
from toolmesh.contracts.events import (
    DiscoveredTool,
    ServerConnected,
    ServerDisconnected,
    ToolDiscovered,
    ToolsDiscovered,
)
from toolmesh.contracts.keys import Role
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.errors import Forbidden
from toolmesh_gateway.auth import Principal
from toolmesh_session_worker.discovery import newly_discovered


def _rest(config: dict[str, object], **fields: object) -> RegisterServerRequest:
    body = {"name": "toolbox", "transport_type": "REST", "connection_config": config, **fields}
    return RegisterServerRequest.model_validate(body)


def test_a_rest_registration_takes_url_and_headers() -> None:
    request = _rest({"url": "https://tools.example.com/api", "headers": {"Authorization": "Bearer ${TOKEN}"}})
    assert request.transport_type == "REST"
    assert _rest({"url": "http://127.0.0.1:8080"}).connection_config["url"] == "http://127.0.0.1:8080"


@pytest.mark.parametrize(
    ("config", "fields", "problem"),
    [
        ({}, {}, "REST transport requires 'url'"),
        ({"base_url": "https://h"}, {}, "unknown field 'base_url'"),
        ({"url": "ftp://h"}, {}, "must be an http(s) URL"),
        ({"url": "http://tools.example.com"}, {}, "must use https://"),
        ({"url": "https://h", "headers": {"a": 1}}, {}, "values must be strings"),
    ],
)
def test_a_rest_registration_follows_the_rules_of_http_upstreams(
    config: dict[str, object], fields: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        _rest(config, **fields)
    assert problem in str(raised.value)
    assert _rest({"url": "http://tools.example.com"}, allow_insecure=True).allow_insecure is True


def test_a_discovered_tool_from_before_categories_decodes_with_its_inferred_category() -> None:
    event = ToolsDiscovered(
        server_id="s", server_name="toolbox", tools=[DiscoveredTool(original_name="send_email", description="Mail")]
    )
    wire = json.loads(event.model_dump_json())
    assert wire["tools"][0]["category"] == "communication"
    del wire["tools"][0]["category"]
    decoded = decode_event(ToolsDiscovered.subject, json.dumps(wire).encode())
    assert isinstance(decoded, ToolsDiscovered) and decoded.tools[0].category is ToolCategory.COMMUNICATION
    kept = DiscoveredTool(original_name="send_email", category=ToolCategory.DATA)  # a given category stays
    assert kept.category is ToolCategory.DATA


@pytest.mark.parametrize(
    "event",
    [
        ServerConnected(
            server_id="s", namespace="team-a", server_name="toolbox", transport_type="REST", tool_count=3, agent="bot"
        ),
        ServerDisconnected(server_id="s", namespace="team-a", server_name="toolbox", was_graceful=False, reason="x"),
        ToolDiscovered(
            server_id="s",
            namespace="team-a",
            server_name="toolbox",
            name="toolbox.echo",
            original_name="echo",
            category=ToolCategory.GENERAL,
        ),
    ],
)
def test_domain_events_carry_the_envelope_and_decode_by_subject(
    event: ServerConnected | ServerDisconnected | ToolDiscovered,
) -> None:
    decoded = decode_event(event.subject, event.model_dump_json().encode())
    assert decoded == event
    assert decoded.namespace == "team-a" and decoded.event_id and decoded.occurred_at


def test_tool_discovered_is_published_only_for_tools_not_stored() -> None:
    snapshot = ToolsDiscovered(
        server_id="s",
        namespace="team-a",
        server_name="toolbox",
        tools=[DiscoveredTool(original_name="echo"), DiscoveredTool(original_name="search_memory")],
    )
    found = newly_discovered(snapshot, [{"original_name": "echo"}])  # rows are read by key, like records
    assert [(e.name, e.category, e.namespace) for e in found] == [
        ("toolbox.search_memory", ToolCategory.MEMORY, "team-a")
    ]
    assert len(newly_discovered(snapshot, [])) == 2


def _principal(role: Role, name: str = "bot") -> Principal:
    return Principal(key_id="k", name=name, role=role, namespace="team-a")


def test_an_agent_owns_only_what_it_registered() -> None:
    agent = _principal(Role.AGENT)
    assert agent.owns("bot") and not agent.owns("other") and not agent.owns(None)
    for role in (Role.OWNER, Role.ADMIN, Role.USER):
        assert _principal(role).owns("other")  # their role decides, not who registered
    assert not agent.manages


@pytest.mark.parametrize(
    ("role", "may"), [(Role.OWNER, True), (Role.ADMIN, True), (Role.AGENT, True), (Role.USER, False)]
)
def test_who_may_register(role: Role, may: bool) -> None:
    if may:
        _principal(role).require_registrar()
    else:
        with pytest.raises(Forbidden):
            _principal(role).require_registrar()
