"""Routing that cannot be hijacked, with real peers: which upstream received each call.

Attacks of issue 23: a tool named ``ghost.echo`` on server ``x`` captured calls meant for server
``ghost``; a later server took an existing public name of the ``/mcp`` aggregate (``team`` + tool
``db__echo`` against ``team__db`` + ``echo``); and a server and a bundle created at once could both
get one ``/mcp/{name}``. Now a server's name owns its prefix, an ambiguous public name belongs to
nobody, and one reservation decides a ``/mcp/{name}``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.harness import System, eventually
from tests.mcp_client import mcp_session, text_of
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
CALL = "/api/v1/tools/call"
SERVERS = "/api/v1/aggregator/servers"


async def call(system: System, name: str, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = await system.api.post(CALL, json={"name": name, "arguments": arguments})
    body: dict[str, Any] = response.json()
    return response.status_code, body


async def tallies(system: System, server: str) -> dict[str, int]:
    """How often each tool added at run time on ``server``'s upstream ran (asked from the upstream)."""
    status, body = await call(system, f"{server}.tallies", {})
    assert status == 200, body
    counted: dict[str, int] = json.loads(body["content"][0]["text"])
    return counted


async def add_tool(system: System, server: str, server_id: str, tool: str) -> None:
    """Make ``server``'s upstream list a new tool, and wait until toolmesh has discovered it."""
    status, body = await call(system, f"{server}.add_tool", {"name": tool})
    assert status == 200, body

    async def listed() -> bool:
        tools = (await system.api.get(f"{SERVERS}/{server_id}/tools")).json()["tools"]
        return tool in {t["original_name"] for t in tools}

    await eventually(listed, what=f"{server} to list {tool}")


async def connected_with_tool(system: System, server: str, config: dict[str, Any], tool: str) -> str:
    """Register ``server``, wait until it is connected, make its upstream list ``tool``; its id."""
    registered = await system.register(server, "HTTP", config)
    await system.wait_connected(registered["id"])
    await add_tool(system, server, registered["id"], tool)
    return str(registered["id"])


async def assert_ghost_echo_not_found_and_not_run_on(system: System, server: str) -> None:
    """``ghost.echo`` is nobody's tool, and ``server``'s own tool of that name did not run."""
    status, body = await call(system, "ghost.echo", {"text": "meant for ghost"})
    assert status == 404 and body["error_code"] == "TOOL_NOT_FOUND", body
    assert "ghost.echo" not in await tallies(system, server)


async def assert_own_ghost_echo_reached(system: System, server: str) -> None:
    """``server``'s own ``ghost.echo`` answers under ``{server}.ghost.echo`` and ran once upstream."""
    status, body = await call(system, f"{server}.ghost.echo", {})
    assert status == 200 and body["metadata"]["routed_to"] == server
    assert (await tallies(system, server))["ghost.echo"] == 1


async def test_a_tool_named_ghost_echo_cannot_capture_calls_for_server_ghost(system: System) -> None:
    async with launch_peer("http", name="ghost") as ghost_peer, launch_peer("http", name="x") as x_peer:
        ghost = await system.register("ghost", "HTTP", ghost_peer.config, auto_connect=False)
        await connected_with_tool(system, "x", x_peer.config, "ghost.echo")

        # ghost is registered but has listed nothing yet: the call is ghost's or nobody's.
        await assert_ghost_echo_not_found_and_not_run_on(system, "x")

        assert (await system.api.post(f"{SERVERS}/{ghost['id']}/connect")).status_code == 200
        await system.wait_connected(ghost["id"])
        status, body = await call(system, "ghost.echo", {"text": "meant for ghost"})
        assert status == 200 and body["metadata"]["routed_to"] == "ghost"
        assert body["content"][0]["text"] == "meant for ghost"  # ghost's echo answered
        assert "ghost.echo" not in await tallies(system, "x")

        # x's tool is still reachable under x's own name.
        await assert_own_ghost_echo_reached(system, "x")


async def test_ghost_echo_is_not_captured_before_ghost_is_registered_or_after_it_is_deleted(system: System) -> None:
    # A dotted name is resolved only as server.tool: raw's own tool "ghost.echo" never answers "ghost.echo".
    async with launch_peer("http", name="ghost") as ghost_peer, launch_peer("http", name="raw") as raw_peer:
        await connected_with_tool(system, "raw", raw_peer.config, "ghost.echo")
        await assert_ghost_echo_not_found_and_not_run_on(system, "raw")

        ghost = await system.register("ghost", "HTTP", ghost_peer.config)
        await system.wait_connected(ghost["id"])
        assert (await system.api.delete(f"{SERVERS}/{ghost['id']}")).status_code in (200, 204)

        async def ghost_gone() -> bool:
            return (await system.api.get(f"{SERVERS}/{ghost['id']}")).status_code == 404

        await eventually(ghost_gone, what="ghost to be deleted")
        await assert_ghost_echo_not_found_and_not_run_on(system, "raw")
        await assert_own_ghost_echo_reached(system, "raw")


async def test_a_later_server_cannot_take_a_public_tool_name_of_the_aggregate(system: System) -> None:
    async with launch_peer("http", name="victim") as victim_peer, launch_peer("http", name="intruder") as intruder_peer:
        victim = await system.register("team__db", "HTTP", victim_peer.config)
        await system.wait_connected(victim["id"])
        async with mcp_session(system) as session:
            before = {t.name: t for t in (await session.list_tools()).tools}
            (public,) = [
                n for n, t in before.items() if n.startswith("team__db") and "Return the text" in (t.description or "")
            ]

            await connected_with_tool(system, "team", intruder_peer.config, "db__echo")

            async def intruder_listed() -> set[str] | None:
                names = {t.name for t in (await session.list_tools()).tools}
                return names if any(n.startswith("team__db__echo") and n != public for n in names) else None

            after: set[str] = await eventually(intruder_listed, what="the intruder's tool in the aggregate")
            assert public in after
            answer = await session.call_tool(public, {"text": "for the victim"})
            assert answer.is_error is False and text_of(answer) == "for the victim"
            if public != "team__db__echo":  # the name both could read as is nobody's
                refused = await session.call_tool("team__db__echo", {"text": "x"})
                assert refused.is_error is True
        assert "db__echo" not in await tallies(system, "team")


async def test_a_server_and_a_bundle_created_at_once_never_share_a_public_name(system: System) -> None:
    async with launch_peer("http", name="alpha") as peer:
        alpha = await system.register("alpha", "HTTP", peer.config)
        await system.wait_connected(alpha["id"])
        for round_ in range(6):
            name = f"shared-{round_}"
            bundle = {"name": name, "include": ["alpha.*"]}
            server = {"name": name, "transport_type": "HTTP", "connection_config": peer.config, "auto_connect": False}
            made = await asyncio.gather(
                system.api.post("/api/v1/endpoints", json=bundle), system.api.post(SERVERS, json=server)
            )
            assert sorted(r.status_code for r in made) == [201, 409], [r.text for r in made]
            taken = made[0] if made[0].status_code == 201 else made[1]
            # The second cannot take the name later either.
            again = await system.api.post(
                SERVERS if taken is made[0] else "/api/v1/endpoints", json=server if taken is made[0] else bundle
            )
            assert again.status_code == 409
