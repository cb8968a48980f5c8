"""The front door's catalog: which events change the visible tool set (and so ``tools/list_changed``)."""

from __future__ import annotations

import pytest

from toolmesh.contracts.events import (
    DiscoveredTool,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    ToolsDiscovered,
)
from toolmesh.contracts.servers import TransportType
from toolmesh.lifecycle import ServerStatus
from toolmesh_gateway.front_door.catalog import Catalog

pytestmark = pytest.mark.unit


def status(status: ServerStatus) -> ServerStatusChanged:
    return ServerStatusChanged(server_id="s1", status=status, history=str(status))


def tools(*names: str, description: str = "d") -> ToolsDiscovered:
    listed = [DiscoveredTool(original_name=n, description=description) for n in names]
    return ToolsDiscovered(server_id="s1", server_name="alpha", tools=listed)


def test_visible_set_changes_only_for_serving_servers_with_tools() -> None:
    catalog = Catalog()
    registered = ServerRegistered(
        server_id="s1", name="alpha", transport_type=TransportType.SSE, sealed_config="x", masked_config={}
    )
    assert catalog.apply(registered, 1) is False
    assert catalog.apply(tools("echo"), 2) is False  # not serving yet
    assert catalog.apply(status(ServerStatus.CONNECTED), 3) is True
    assert [(s.name, t.name) for s, t in catalog.visible()] == [("alpha", "echo")]
    assert catalog.apply(status(ServerStatus.DEGRADED), 4) is False  # still visible
    assert catalog.apply(tools("echo"), 5) is False  # same list
    assert catalog.apply(tools("echo", description="new"), 6) is True  # a definition changed
    assert catalog.apply(tools("echo", "add", description="new"), 7) is True
    assert catalog.apply(tools("echo"), 7) is False  # already applied sequence
    assert catalog.apply(status(ServerStatus.DISCONNECTED), 8) is True
    assert catalog.visible() == []
    assert catalog.servers()[0].transport == "SSE"
    assert catalog.apply(ServerRemoved(server_id="s1", name="alpha"), 9) is False  # was not visible
    assert catalog.server_named("alpha") is None
    assert catalog.version == 4
