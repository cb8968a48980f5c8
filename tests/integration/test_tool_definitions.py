"""Upstream tool definitions toolmesh refuses, against a hostile peer (``tests/peers/rug_pull.py``).

Attack of issue 23: a tool name past 255 characters made the projector skip the whole tool list, so the
REST tools view (and the admin's review) kept the old list while ``/mcp`` served the new one, names
like ``crlf\\r\\nX-Injected: 1``, a Cyrillic look-alike of ``echo``, ``../../admin``, an RTL override and a 2 MB
description included. Now discovery leaves out every definition breaking the MCP tool-name rule or the
size bounds, and both surfaces read the same list.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import System, eventually
from tests.mcp_client import mcp_session, text_of
from tests.rug_pull_control import (  # noqa: F401 (the module's system and upstream fixtures)
    Upstream,
    loopback_system,
    rug_pull_upstream,
    tools_of,
)

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
BAD = {
    "long": "a" * 300,
    "crlf": "crlf\r\nX-Injected: 1",
    "homoglyph": "\u0435cho",  # Cyrillic ie, a look-alike of "echo"
    "traversal": "../../admin",
    "rtl": "rtl\u202egnp.exe",
}
HUGE = "huge_description"


async def hostile_server(system: System, upstream: Upstream, new_tools: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """Register the peer as ``hostile``, make it list the refused definitions and one good new tool
    ``fresh``, and rediscover; its id and its tools in the REST view (which has ``fresh``)."""
    server = await system.register("hostile", "HTTP", upstream.config, new_tools=new_tools)
    await system.wait_connected(server["id"])
    tools = [*((name, "Echo.") for name in BAD.values()), (HUGE, "x" * 2_000_000), ("fresh", "Echo again.")]
    for name, description in tools:
        await upstream.list_tool(name, description)
    assert (await system.api.post(f"{SERVERS}/{server['id']}/tools/refresh")).status_code == 202

    async def probe() -> dict[str, dict[str, Any]] | None:
        found = await tools_of(system, server["id"])
        return found if "fresh" in found else None

    rest: dict[str, dict[str, Any]] = await eventually(probe, timeout=30, what="the new tool list in the REST view")
    return str(server["id"]), rest


async def test_refused_definitions_reach_neither_the_rest_view_nor_mcp_and_both_agree(
    system: System, upstream: Upstream
) -> None:
    server_id, rest = await hostile_server(system, upstream, "auto")

    assert set(rest) == {"echo", "add", "fresh"}
    history = (await system.api.get(f"{SERVERS}/{server_id}/history")).json()
    discovered = [e["details"] for e in history if e["event_type"] == "TOOLS_DISCOVERED"]
    assert discovered[-1]["left_out"] == len(BAD) + 1  # the admin sees how many were refused
    async with mcp_session(system, path="/mcp/hostile") as session:
        listed = {t.name: t.description for t in (await session.list_tools()).tools}
        assert set(listed) == set(rest)  # the catalog serves exactly what the admin sees
        answer = await session.call_tool("fresh", {"text": "still works"})
        assert answer.is_error is False and text_of(answer) == "still works"
    async with mcp_session(system) as session:
        aggregate = [t.name for t in (await session.list_tools()).tools]
    for bad in (*BAD.values(), HUGE):
        assert not any(bad in name for name in aggregate), bad
    status = await system.api.post("/api/v1/tools/call", json={"name": "hostile.fresh", "arguments": {"text": "y"}})
    assert status.status_code == 200, status.text
    assert await upstream.calls() == ["fresh", "fresh"]


async def test_a_held_change_stays_visible_to_the_admin_beside_refused_definitions(
    system: System, upstream: Upstream
) -> None:
    _, rest = await hostile_server(system, upstream, "review")

    assert set(rest) == {"echo", "add", "fresh"}
    assert rest["fresh"]["held"] is not None and rest["fresh"]["held"]["reason"] == "new"
    refused = await system.api.post("/api/v1/tools/call", json={"name": "hostile.fresh", "arguments": {"text": "y"}})
    assert refused.status_code == 409 and refused.json()["error_code"] == "TOOL_CHANGED"
