"""The gateway's catalog: a snapshot plus events, with the projector's rules; routes calls and says
which events change the visible tool set (and so ``tools/list_changed``)."""

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
from toolmesh.routing import resolve_route
from toolmesh_gateway.catalog import Catalog, CatalogServer, CatalogTool

pytestmark = pytest.mark.unit


def registered(server_id: str, name: str, transport: TransportType = TransportType.STDIO) -> ServerRegistered:
    return ServerRegistered(
        server_id=server_id, name=name, transport_type=transport, sealed_config="x", masked_config={}
    )


def discovered(server_id: str, name: str, *tools: str, description: str | None = None) -> ToolsDiscovered:
    listed = [DiscoveredTool(original_name=t, description=description) for t in tools]
    return ToolsDiscovered(server_id=server_id, server_name=name, tools=listed)


def status(server_id: str, value: ServerStatus) -> ServerStatusChanged:
    return ServerStatusChanged(server_id=server_id, status=value, history=str(value))


def alpha(value: ServerStatus, server_id: str = "s1") -> CatalogServer:
    return CatalogServer(server_id, "alpha", value, "STDIO")


# -- routing inputs ------------------------------------------------------------------------------


def test_events_build_routes() -> None:
    catalog = Catalog()
    catalog.apply(registered("s1", "alpha"), 1)
    catalog.apply(status("s1", ServerStatus.CONNECTED), 2)
    catalog.apply(discovered("s1", "alpha", "echo", "api.v2.create"), 3)
    assert catalog.server_named("alpha") == alpha(ServerStatus.CONNECTED)
    assert catalog.has_tool("s1", "api.v2.create") and catalog.applied_seq == 3
    route = resolve_route(catalog, "alpha.api.v2.create")
    assert route.tool == "api.v2.create" and route.server.identity() == {
        "id": "s1",
        "name": "alpha",
        "status": "CONNECTED",
    }
    assert [s.id for s in catalog.servers_with_tool("echo")] == ["s1"]


def test_tool_list_is_a_snapshot() -> None:
    catalog = Catalog()
    catalog.apply(registered("s1", "alpha"), 1)
    catalog.apply(discovered("s1", "alpha", "a", "b"), 2)
    catalog.apply(discovered("s1", "alpha", "b", "c"), 3)
    assert not catalog.has_tool("s1", "a") and catalog.has_tool("s1", "c")
    assert catalog.servers_with_tool("a") == [] and catalog.tool("s1", "a") is None
    assert [t.name for t in catalog.tools_of("s1")] == ["b", "c"]


def test_servers_with_tool_lists_every_holder() -> None:
    catalog = Catalog()
    catalog.apply(registered("s1", "alpha"), 1)
    catalog.apply(registered("s2", "beta"), 2)
    catalog.apply(discovered("s1", "alpha", "echo"), 3)
    catalog.apply(discovered("s2", "beta", "echo"), 4)
    assert [s.id for s in catalog.servers_with_tool("echo")] == ["s1", "s2"]
    catalog.apply(discovered("s1", "alpha"), 5)
    assert [s.id for s in catalog.servers_with_tool("echo")] == ["s2"]


def test_removal_forgets_server_and_tools() -> None:
    catalog = Catalog()
    catalog.apply(registered("s1", "alpha"), 1)
    catalog.apply(discovered("s1", "alpha", "echo"), 2)
    catalog.apply(ServerRemoved(server_id="s1", name="alpha"), 3)
    assert catalog.server("s1") is None and catalog.server_named("alpha") is None
    assert catalog.servers_with_tool("echo") == [] and catalog.tools_of("s1") == []
    # The name is free again.
    catalog.apply(registered("s2", "alpha"), 4)
    assert catalog.server_named("alpha") == alpha(ServerStatus.DISCONNECTED, "s2")


def test_projector_rules_taken_name_and_unknown_server_are_ignored() -> None:
    catalog = Catalog()
    catalog.apply(registered("s1", "alpha"), 1)
    catalog.apply(registered("s2", "alpha"), 2)  # the projector drops it: name already taken
    catalog.apply(discovered("ghost", "ghost", "echo"), 3)
    catalog.apply(status("ghost", ServerStatus.CONNECTED), 4)
    catalog.apply(ServerRemoved(server_id="ghost", name="ghost"), 5)
    assert catalog.server("s2") is None and catalog.server("ghost") is None
    assert catalog.server_named("alpha") == alpha(ServerStatus.DISCONNECTED)
    assert catalog.servers_with_tool("echo") == [] and catalog.applied_seq == 5
    assert catalog.version == 0


def test_already_applied_sequences_are_skipped() -> None:
    catalog = Catalog()
    catalog.load([alpha(ServerStatus.CONNECTED)], [("s1", CatalogTool("echo"))], applied_seq=10)
    assert not catalog.apply(status("s1", ServerStatus.ERROR), 10)
    assert catalog.server("s1") == alpha(ServerStatus.CONNECTED) and catalog.applied_seq == 10
    catalog.apply(status("s1", ServerStatus.DEGRADED), 11)
    assert catalog.server("s1") == alpha(ServerStatus.DEGRADED) and catalog.applied_seq == 11


def test_snapshot_replaces_everything_and_ignores_tools_of_unknown_servers() -> None:
    catalog = Catalog()
    catalog.apply(registered("old", "old"), 1)
    catalog.apply(discovered("old", "old", "x"), 2)
    catalog.load([alpha(ServerStatus.CONNECTED)], [("s1", CatalogTool("echo")), ("nope", CatalogTool("x"))], 5)
    assert catalog.server("old") is None and catalog.server_named("old") is None
    assert catalog.has_tool("s1", "echo") and catalog.servers_with_tool("x") == []
    assert catalog.applied_seq == 5 and catalog.version == 1  # a load always bumps the version


def test_other_events_and_skips_only_move_the_sequence() -> None:
    catalog = Catalog()
    assert catalog.apply(HealthChecked(server_id="s1", healthy=True), 1) is False
    catalog.skip(2)
    assert catalog.applied_seq == 2 and catalog.version == 0
    catalog.skip(1)  # never backwards
    assert catalog.applied_seq == 2


# -- the visible set and its version ---------------------------------------------------------------


def test_visible_set_changes_only_for_serving_servers_with_tools() -> None:
    catalog = Catalog()
    assert catalog.apply(registered("s1", "alpha", TransportType.SSE), 1) is False
    assert catalog.apply(discovered("s1", "alpha", "echo", description="d"), 2) is False  # not serving yet
    assert catalog.apply(status("s1", ServerStatus.CONNECTED), 3) is True
    assert [(s.name, t.name) for s, t in catalog.visible()] == [("alpha", "echo")]
    assert catalog.apply(status("s1", ServerStatus.DEGRADED), 4) is False  # still visible
    assert catalog.apply(discovered("s1", "alpha", "echo", description="d"), 5) is False  # same list
    assert catalog.apply(discovered("s1", "alpha", "echo", description="new"), 6) is True  # a definition changed
    assert catalog.tool("s1", "echo") == CatalogTool("echo", "new", {})
    assert catalog.apply(discovered("s1", "alpha", "echo", "add", description="new"), 7) is True
    assert catalog.apply(discovered("s1", "alpha", "echo", description="d"), 7) is False  # already applied sequence
    assert catalog.apply(status("s1", ServerStatus.DISCONNECTED), 8) is True
    assert catalog.visible() == []
    assert catalog.servers()[0].transport == "SSE"
    assert catalog.apply(ServerRemoved(server_id="s1", name="alpha"), 9) is False  # was not visible
    assert catalog.server_named("alpha") is None
    assert catalog.version == 4


def test_removing_a_visible_server_with_tools_changes_the_visible_set() -> None:
    catalog = Catalog()
    catalog.load([alpha(ServerStatus.CONNECTED)], [("s1", CatalogTool("echo"))], applied_seq=1)
    version = catalog.version
    assert catalog.apply(ServerRemoved(server_id="s1", name="alpha"), 2) is True
    assert catalog.visible() == [] and catalog.version == version + 1


def test_status_change_of_a_server_without_tools_is_not_a_visible_change() -> None:
    catalog = Catalog()
    catalog.apply(registered("s1", "alpha"), 1)
    assert catalog.apply(status("s1", ServerStatus.CONNECTED), 2) is False
    assert catalog.server("s1") == alpha(ServerStatus.CONNECTED) and catalog.version == 0
