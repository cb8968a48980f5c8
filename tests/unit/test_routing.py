"""BR-005 route resolution and the status check, over an in-memory view (no servers)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from toolmesh.errors import ServerNotFound, ServerUnavailable, ToolAmbiguous, ToolChanged, ToolNotFound
from toolmesh.lifecycle import ServerStatus
from toolmesh.pinning import Hold
from toolmesh_gateway.routing import RoutingStrategy, ServerRoute, resolve_route, serving_warning

pytestmark = pytest.mark.unit
A = ServerRoute("id-a", "server-a", ServerStatus.CONNECTED)
B = ServerRoute("id-b", "server-b", ServerStatus.CONNECTED)


class View:
    """A ``RouteSource`` from plain data."""

    def __init__(self, tools: dict[ServerRoute, set[str]]) -> None:
        self.tools = {server.id: names for server, names in tools.items()}
        self.servers = {server.id: server for server in tools}

    def server(self, server_id: str) -> ServerRoute | None:
        return self.servers.get(server_id)

    def servers_named(self, name: str) -> Sequence[ServerRoute]:
        return [s for s in self.servers.values() if s.name == name]

    def has_tool(self, server_id: str, original_name: str) -> bool:
        return original_name in self.tools.get(server_id, set())

    def servers_with_tool(self, original_name: str) -> Sequence[ServerRoute]:
        return [self.servers[i] for i, names in self.tools.items() if original_name in names]

    def hold_of(self, server_id: str, original_name: str) -> Hold | None:
        return None


VIEW = View({A: {"echo", "api.v2.create", "only_a"}, B: {"echo", "only_b"}})


def test_br005_explicit_server_id_wins() -> None:
    route = resolve_route(VIEW, "echo", "id-b")
    assert (route.server, route.tool, route.strategy) == (B, "echo", RoutingStrategy.EXPLICIT_SERVER)


def test_br005_explicit_server_id_accepts_namespaced_name() -> None:
    assert resolve_route(VIEW, "server-b.echo", "id-b").tool == "echo"


@pytest.mark.parametrize("name", ["brand_new", "server-a.brand_new", "only_b"])
def test_pinning_a_tool_the_server_never_listed_is_not_found_even_with_server_id(name: str) -> None:
    # Only pinned definitions are callable: the upstream never hears of a tool discovery did not list.
    with pytest.raises(ToolNotFound) as caught:
        resolve_route(VIEW, name, "id-a")
    assert caught.value.status == 404 and caught.value.context["server"] == "server-a"


def test_br005_unknown_server_id_is_server_not_found() -> None:
    with pytest.raises(ServerNotFound) as caught:
        resolve_route(VIEW, "echo", "nope")
    assert caught.value.status == 404 and caught.value.context == {"server_id": "nope"}


def test_br005_namespaced_name_resolves() -> None:
    route = resolve_route(VIEW, "server-b.echo")
    assert (route.server, route.tool, route.strategy) == (B, "echo", RoutingStrategy.NAMESPACE_RESOLVED)


def test_ec002_first_dot_splits() -> None:
    route = resolve_route(VIEW, "server-a.api.v2.create")
    assert (route.server, route.tool) == (A, "api.v2.create")


def test_a_tool_named_like_another_servers_tool_cannot_capture_its_calls() -> None:
    ghost = ServerRoute("id-ghost", "ghost", ServerStatus.CONNECTED)
    intruder = ServerRoute("id-x", "x", ServerStatus.CONNECTED)
    # ghost has not listed echo (yet): the call is not found, never x's tool named "ghost.echo".
    with pytest.raises(ToolNotFound) as caught:
        resolve_route(View({ghost: set(), intruder: {"ghost.echo"}}), "ghost.echo")
    assert caught.value.context == {"tool": "ghost.echo"}
    route = resolve_route(View({ghost: {"echo"}, intruder: {"ghost.echo"}}), "ghost.echo")
    assert (route.server, route.tool) == (ghost, "echo")
    # x's tool stays reachable under x's own name.
    assert resolve_route(View({ghost: set(), intruder: {"ghost.echo"}}), "x.ghost.echo").server == intruder


def test_a_dotted_name_is_never_captured_when_no_server_has_its_prefix() -> None:
    # Before "ghost" is registered and after it is deleted, "ghost.echo" is not x's tool "ghost.echo".
    intruder = ServerRoute("id-x", "x", ServerStatus.CONNECTED)
    view = View({intruder: {"ghost.echo"}})
    with pytest.raises(ToolNotFound) as caught:
        resolve_route(view, "ghost.echo")
    assert caught.value.context == {"tool": "ghost.echo"}
    route = resolve_route(view, "x.ghost.echo")
    assert (route.server, route.tool, route.strategy) == (intruder, "ghost.echo", RoutingStrategy.NAMESPACE_RESOLVED)
    assert resolve_route(view, "ghost.echo", "id-x").tool == "ghost.echo"


def test_ec002_dotted_original_name_resolves_only_namespaced() -> None:
    # EC-002: only the first dot separates server from tool; the bare dotted name is not looked up.
    with pytest.raises(ToolNotFound):
        resolve_route(VIEW, "api.v2.create")
    route = resolve_route(VIEW, "server-a.api.v2.create")
    assert (route.server, route.tool, route.strategy) == (A, "api.v2.create", RoutingStrategy.NAMESPACE_RESOLVED)


def test_br005_unique_original_name_resolves() -> None:
    route = resolve_route(VIEW, "only_b")
    assert (route.server, route.tool, route.strategy) == (B, "only_b", RoutingStrategy.LOOKUP_RESOLVED)


def test_br005_original_name_on_several_servers_is_ambiguous() -> None:
    with pytest.raises(ToolAmbiguous) as caught:
        resolve_route(VIEW, "echo")
    assert caught.value.status == 400
    assert caught.value.context["servers"] == [
        {"id": "id-a", "name": "server-a", "namespace": "default"},
        {"id": "id-b", "name": "server-b", "namespace": "default"},
    ]


@pytest.mark.parametrize("name", ["missing", "server-a.missing", "server-a.only_b", "nowhere.echo"])
def test_br005_unknown_tool_is_tool_not_found(name: str) -> None:
    with pytest.raises(ToolNotFound) as caught:
        resolve_route(VIEW, name)
    assert caught.value.status == 404 and caught.value.context == {"tool": name}


def test_br005_connected_server_has_no_warning() -> None:
    assert serving_warning(A) is None


def test_br005_degraded_server_executes_with_warning() -> None:
    warning = serving_warning(ServerRoute("id", "slowpoke", ServerStatus.DEGRADED))
    assert warning is not None and "slowpoke" in warning and "DEGRADED" in warning


@pytest.mark.parametrize("status", [ServerStatus.DISCONNECTED, ServerStatus.CONNECTING, ServerStatus.ERROR])
def test_br005_server_not_serving_is_unavailable_with_server_info(status: ServerStatus) -> None:
    with pytest.raises(ServerUnavailable) as caught:
        serving_warning(ServerRoute("id-x", "down", status))
    body = caught.value.body()
    assert caught.value.status == 503
    assert body["error_code"] == "SERVER_UNAVAILABLE" and body["detail"] == "Server unavailable: down"
    assert body["server"] == {"id": "id-x", "name": "down", "status": str(status)}


def test_a_held_tool_resolves_then_refuses_with_tool_changed() -> None:
    class Held(View):
        def hold_of(self, server_id: str, original_name: str) -> Hold | None:
            return Hold("changed", ["input_schema"]) if original_name == "only_a" else None

    view = Held({A: {"echo", "only_a"}})
    with pytest.raises(ToolChanged) as caught:
        resolve_route(view, "server-a.only_a")
    assert caught.value.status == 409 and caught.value.error_code == "TOOL_CHANGED"
    assert caught.value.context["fields"] == ["input_schema"] and "input_schema" in caught.value.detail
    assert resolve_route(view, "echo").tool == "echo"
