"""The gateway's route table: a snapshot plus events, with the projector's rules."""

from __future__ import annotations

import pytest

from toolmesh.contracts.events import (
    DiscoveredTool,
    HealthChecked,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    ToolsDiscovered,
)
from toolmesh.contracts.servers import TransportType
from toolmesh.lifecycle import ServerStatus
from toolmesh.routing import ServerRoute, resolve_route
from toolmesh_gateway.route_table import RouteTable

pytestmark = pytest.mark.unit


def registered(server_id: str, name: str) -> ServerRegistered:
    return ServerRegistered(
        server_id=server_id, name=name, transport_type=TransportType.STDIO, sealed_config="x", masked_config={}
    )


def discovered(server_id: str, name: str, *tools: str) -> ToolsDiscovered:
    return ToolsDiscovered(
        server_id=server_id, server_name=name, tools=[DiscoveredTool(original_name=t) for t in tools]
    )


def status(server_id: str, value: ServerStatus) -> ServerStatusChanged:
    return ServerStatusChanged(server_id=server_id, status=value, history=str(value))


def test_events_build_routes() -> None:
    table = RouteTable()
    table.apply(registered("s1", "alpha"), 1)
    table.apply(status("s1", ServerStatus.CONNECTED), 2)
    table.apply(discovered("s1", "alpha", "echo", "api.v2.create"), 3)
    assert table.server_named("alpha") == ServerRoute("s1", "alpha", ServerStatus.CONNECTED)
    assert table.has_tool("s1", "api.v2.create") and table.applied_seq == 3
    assert resolve_route(table, "alpha.api.v2.create").tool == "api.v2.create"
    assert [s.id for s in table.servers_with_tool("echo")] == ["s1"]


def test_tool_list_is_a_snapshot() -> None:
    table = RouteTable()
    table.apply(registered("s1", "alpha"), 1)
    table.apply(discovered("s1", "alpha", "a", "b"), 2)
    table.apply(discovered("s1", "alpha", "b", "c"), 3)
    assert not table.has_tool("s1", "a") and table.has_tool("s1", "c")
    assert table.servers_with_tool("a") == []


def test_removal_forgets_server_and_tools() -> None:
    table = RouteTable()
    table.apply(registered("s1", "alpha"), 1)
    table.apply(discovered("s1", "alpha", "echo"), 2)
    table.apply(ServerRemoved(server_id="s1", name="alpha"), 3)
    assert table.server("s1") is None and table.server_named("alpha") is None
    assert table.servers_with_tool("echo") == []
    # The name is free again.
    table.apply(registered("s2", "alpha"), 4)
    assert table.server_named("alpha") == ServerRoute("s2", "alpha", ServerStatus.DISCONNECTED)


def test_projector_rules_taken_name_and_unknown_server_are_ignored() -> None:
    table = RouteTable()
    table.apply(registered("s1", "alpha"), 1)
    table.apply(registered("s2", "alpha"), 2)  # the projector drops it: name already taken
    table.apply(discovered("ghost", "ghost", "echo"), 3)
    table.apply(status("ghost", ServerStatus.CONNECTED), 4)
    assert table.server("s2") is None and table.server("ghost") is None
    assert table.servers_with_tool("echo") == [] and table.applied_seq == 4


def test_already_applied_sequences_are_skipped() -> None:
    table = RouteTable()
    table.load([ServerRoute("s1", "alpha", ServerStatus.CONNECTED)], [("s1", "echo")], applied_seq=10)
    assert not table.apply(status("s1", ServerStatus.ERROR), 10)
    assert table.server("s1") == ServerRoute("s1", "alpha", ServerStatus.CONNECTED)
    assert table.apply(status("s1", ServerStatus.DEGRADED), 11)
    assert table.server("s1") == ServerRoute("s1", "alpha", ServerStatus.DEGRADED)


def test_snapshot_replaces_everything_and_ignores_tools_of_unknown_servers() -> None:
    table = RouteTable()
    table.apply(registered("old", "old"), 1)
    table.load([ServerRoute("s1", "alpha", ServerStatus.CONNECTED)], [("s1", "echo"), ("nope", "x")], 5)
    assert table.server("old") is None and table.has_tool("s1", "echo") and table.servers_with_tool("x") == []


def test_other_events_and_skips_only_move_the_sequence() -> None:
    table = RouteTable()
    table.apply(HealthChecked(server_id="s1", healthy=True), 1)
    table.skip(2)
    assert table.applied_seq == 2
