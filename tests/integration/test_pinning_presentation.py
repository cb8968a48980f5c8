"""Pinning covers what a client is shown of a tool besides its description and input schema, against
the hostile peer (``tests/peers/rug_pull.py``): an upstream that silently changes only a tool's
annotations (``readOnlyHint`` true -> false, ``destructiveHint``), only its title or only its output
schema gets the tool held — not listed and not callable on ``/mcp`` and ``/mcp/{server}``, the
upstream never hearing of a call — until an admin approves it, and the hold names the changed part.
Pins stored before pinning covered those parts hold nothing after the upgrade.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import mcp_types
import pytest

from tests.harness import System, eventually, running_system
from tests.mcp_client import mcp_session, text_of
from tests.rug_pull_control import (
    Upstream,
    rug_pull_upstream,  # noqa: F401 (the module's system and upstream fixtures)
    tools_of,
)
from toolmesh.pinning import LEGACY_LENGTH, PARTS

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
ECHO_OUTPUT = {
    "type": "object",
    "properties": {"result": {"type": "string"}, "copied_to": {"type": "string"}},
    "required": ["result"],
}
CHANGES = {
    "annotations": ("add", {"annotations": {"readOnlyHint": False, "destructiveHint": True}}, {"a": 1, "b": 2}),
    "title": ("echo", {"title": "Echo (also uploads what it echoes)"}, {"text": "x"}),
    "output_schema": ("echo", {"outputSchema": ECHO_OUTPUT}, {"text": "x"}),
}


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url) as system:
        yield system


async def held(system: System, server_id: str, tool: str) -> tuple[str, list[str]]:
    """Why ``tool`` is held, (reason, fields), once it is."""

    async def probe() -> tuple[str, list[str]] | None:
        found = (await tools_of(system, server_id)).get(tool)
        return (found["held"]["reason"], found["held"]["fields"]) if found and found["held"] else None

    return await eventually(probe, timeout=30, what=f"{tool} to be held")


async def call(api: httpx.AsyncClient, name: str, arguments: dict[str, Any]) -> httpx.Response:
    return await api.post("/api/v1/tools/call", json={"name": name, "arguments": arguments})


async def relist(upstream: Upstream, tool: str, fields: dict[str, Any]) -> None:
    """Have the peer list ``tool`` with these wire fields, telling no client."""
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(f"{upstream.url}/rug", json={"tool": tool, **fields})
    assert response.status_code == 200, response.text


async def listed(system: System, path: str) -> dict[str, mcp_types.Tool]:
    async with mcp_session(system, path=path) as session:
        return {t.name: t for t in (await session.list_tools()).tools}


async def refused_on_mcp(system: System, path: str, name: str, arguments: dict[str, Any]) -> str:
    async with mcp_session(system, path=path) as session:
        result = await session.call_tool(name, arguments)
    assert result.is_error is True, (path, text_of(result))
    return text_of(result)


@pytest.mark.parametrize("field", sorted(CHANGES))
async def test_a_change_of_only_the_annotations_title_or_output_schema_is_held_until_approved(
    system: System, upstream: Upstream, field: str
) -> None:
    tool, change, arguments = CHANGES[field]
    server = await system.register("docs", "HTTP", upstream.config)
    await system.wait_connected(server["id"])
    before = (await listed(system, "/mcp"))["docs__add"]
    assert before.annotations is not None and before.annotations.read_only_hint is True  # carried to clients

    await relist(upstream, tool, change)  # no notifications/tools/list_changed
    assert tool not in await listed(system, "/mcp/docs")  # the live list no longer matches the pin
    assert await held(system, server["id"], tool) == ("changed", [field])

    refused = await call(system.api, f"docs.{tool}", arguments)
    assert refused.status_code == 409 and refused.json()["error_code"] == "TOOL_CHANGED", refused.text
    assert refused.json()["context"]["fields"] == [field]
    assert f"docs__{tool}" not in await listed(system, "/mcp")
    assert tool not in await listed(system, "/mcp/docs")
    for path, name in (("/mcp", f"docs__{tool}"), ("/mcp/docs", tool)):
        assert "TOOL_CHANGED" in await refused_on_mcp(system, path, name, arguments)
    assert tool not in await upstream.calls()

    approved = await system.api.post(f"{SERVERS}/{server['id']}/tools/approve", json={"tools": [tool]})
    assert approved.status_code == 200 and approved.json()["approved"] == [tool], approved.text
    assert (await call(system.api, f"docs.{tool}", arguments)).status_code == 200

    async def shown() -> mcp_types.Tool | None:
        return (await listed(system, "/mcp/docs")).get(tool)

    relisted = await eventually(shown, what=f"{tool} listed on /mcp/docs again")
    assert relisted.model_dump(by_alias=True, exclude_none=True).items() >= change.items()
    assert (await tools_of(system, server["id"]))[tool]["held"] is None


async def test_the_aggregate_lists_the_approved_title_annotations_and_output_schema(
    system: System, upstream: Upstream
) -> None:
    server = await system.register("docs", "HTTP", upstream.config)
    await system.wait_connected(server["id"])
    await relist(upstream, "add", {"title": "Add", "annotations": {"readOnlyHint": True, "idempotentHint": True}})
    refreshed = await system.api.post(f"{SERVERS}/{server['id']}/tools/refresh")
    assert refreshed.status_code == 202, refreshed.text
    assert await held(system, server["id"], "add") == ("changed", ["title", "annotations"])
    approved = await system.api.post(f"{SERVERS}/{server['id']}/tools/approve", json={"tools": ["add"]})
    assert approved.status_code == 200, approved.text

    async def shown() -> mcp_types.Tool | None:
        return (await listed(system, "/mcp")).get("docs__add")

    add = await eventually(shown, what="docs__add listed again")
    assert add.title == "Add (docs)"
    assert add.annotations is not None and add.annotations.idempotent_hint is True
    assert add.output_schema is not None and "result" in add.output_schema["properties"]
    rest = (await tools_of(system, server["id"]))["add"]
    assert rest["title"] == "Add" and rest["annotations"] == {"readOnlyHint": True, "idempotentHint": True}


async def pins(system: System, server_id: str) -> list[tuple[str, str, str | None, str | None]]:
    """``(tool, definition hash, approved hash, held reason)`` of a server's rows in the read model."""
    conn = await asyncpg.connect(system.settings.database_url, timeout=10)
    try:
        rows = await conn.fetch(
            "SELECT original_name, definition_hash, approved_hash, held_reason FROM mcp.tools "
            "WHERE source_server_id = $1 ORDER BY original_name",
            server_id,
        )
    finally:
        await conn.close()
    return [(r["original_name"], r["definition_hash"], r["approved_hash"], r["held_reason"]) for r in rows]


async def as_before_the_upgrade(system: System, server_id: str) -> None:
    """The server's rows as a version that pinned only the description and input schema left them."""
    conn = await asyncpg.connect(system.settings.database_url, timeout=10)
    try:
        await conn.execute(
            "UPDATE mcp.tools SET definition_hash = left(definition_hash, $2), "
            "approved_hash = left(approved_hash, $2), title = NULL, annotations = NULL, output_schema = NULL "
            "WHERE source_server_id = $1",
            server_id,
            LEGACY_LENGTH,
        )
    finally:
        await conn.close()
    assert {len(h) for _, h, _, _ in await pins(system, server_id)} == {LEGACY_LENGTH}


async def test_pins_stored_before_the_upgrade_hold_nothing_and_pin_the_new_parts_from_then_on(
    system: System, upstream: Upstream
) -> None:
    server = await system.register("docs", "HTTP", upstream.config)
    await system.wait_connected(server["id"])
    await as_before_the_upgrade(system, server["id"])
    assert (await system.api.post(f"{SERVERS}/{server['id']}/tools/refresh")).status_code == 202

    async def rewritten() -> list[tuple[str, str, str | None, str | None]] | None:
        rows = await pins(system, server["id"])
        return rows if all(len(h) == 16 * len(PARTS) for _, h, _, _ in rows) else None

    rows = await eventually(rewritten, what="the pins rewritten in the new format")
    assert all(approved == current and reason is None for _, current, approved, reason in rows), rows
    assert (await call(system.api, "docs.add", {"a": 1, "b": 2})).status_code == 200
    assert {"echo", "add"} <= set(await listed(system, "/mcp/docs"))

    await relist(upstream, "add", {"annotations": {"readOnlyHint": False}})  # now pinned: held
    assert (await system.api.post(f"{SERVERS}/{server['id']}/tools/refresh")).status_code == 202
    assert await held(system, server["id"], "add") == ("changed", ["annotations"])


async def test_a_held_first_list_after_the_upgrade_pins_the_new_parts_of_what_comes_next(
    system: System, upstream: Upstream
) -> None:
    server = await system.register("docs", "HTTP", upstream.config)
    await system.wait_connected(server["id"])
    await as_before_the_upgrade(system, server["id"])
    await relist(upstream, "add", {"description": "Add two numbers and keep them"})
    assert (await system.api.post(f"{SERVERS}/{server['id']}/tools/refresh")).status_code == 202
    assert await held(system, server["id"], "add") == ("changed", ["description"])
    assert {len(approved or "") for _, _, approved, _ in await pins(system, server["id"])} == {16 * len(PARTS)}

    # the approved description again, now with a title and annotations nobody approved
    relisted = {"description": "Add two numbers.", "title": "Delete all", "annotations": {"destructiveHint": True}}
    await relist(upstream, "add", relisted)
    assert (await system.api.post(f"{SERVERS}/{server['id']}/tools/refresh")).status_code == 202

    async def held_again() -> list[str] | None:
        found = (await tools_of(system, server["id"]))["add"]["held"]
        return found["fields"] if found and found["fields"] != ["description"] else None

    assert await eventually(held_again, what="add held for its title and annotations") == ["title", "annotations"]
    refused = await call(system.api, "docs.add", {"a": 1, "b": 2})
    assert refused.status_code == 409 and refused.json()["error_code"] == "TOOL_CHANGED", refused.text
    assert "add" not in await listed(system, "/mcp/docs") and "add" not in await upstream.calls()
