"""Bad input is answered with a 4xx and the contract's error body, never a 5xx or a protocol error:
JSON nested too deep (with and without ``Idempotency-Key``, over REST and ``/mcp``), a malformed
``mcp-session-id`` header, bad arguments to a code-mode pack."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.connected_peer import running_with_peer
from tests.harness import System, running_system
from tests.mcp_client import mcp_session, mcp_url, text_of

pytestmark = pytest.mark.integration
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}


def nested(depth: int) -> object:
    """A JSON value ``depth`` levels deep (arrays and objects in turn)."""
    value: object = "x"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def assert_validation_error(response: httpx.Response) -> None:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error_code"] == "VALIDATION_ERROR" and isinstance(body["detail"], str), body
    assert body["context"] == {"max_depth": 64}


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as running:
        yield running


@pytest.fixture
async def demo(nats_url: str, database_url: str) -> AsyncIterator[System]:
    """A toolmesh with the demo peer connected as ``demo``."""
    async with running_with_peer(nats_url, database_url, "demo") as (running, _):
        yield running


async def mcp_session_id(system: System) -> str:
    """A client session opened over raw HTTP (the SDK client would refuse to send what these tests send)."""
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    opened = await system.api.post(mcp_url(system), json=hello, headers=MCP_HEADERS)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await system.api.post(mcp_url(system), json=ready, headers={**MCP_HEADERS, "mcp-session-id": session})
    return session


@pytest.mark.parametrize("idempotency_key", [None, "deep-body-1"])
async def test_json_nested_100000_deep_is_a_validation_error_with_or_without_idempotency_key(
    system: System, idempotency_key: str | None
) -> None:
    headers = {"content-type": "application/json", **({"Idempotency-Key": idempotency_key} if idempotency_key else {})}
    body = "[" * 100_000 + "]" * 100_000
    for path in ("/api/v1/aggregator/servers", "/api/v1/tools/call", "/api/v1/search", "/api/v1/auth/keys"):
        assert_validation_error(await system.api.post(path, content=body, headers=headers))
    # a text body that is deep JSON is no JSON for the routes, and still not a 5xx for idempotency
    plain = await system.api.post("/api/v1/search", content=body, headers={**headers, "content-type": "text/plain"})
    assert_validation_error(plain)


async def test_json_within_the_depth_limit_still_reaches_the_route(system: System) -> None:
    registration = {"name": "deep-ok", "transport_type": "STDIO", "connection_config": {"command": "srv"}}
    response = await system.api.post(
        "/api/v1/aggregator/servers", json={**registration, "auto_connect": False, "metadata": nested(60)}
    )
    assert response.status_code in (201, 422), response.text
    if response.status_code == 422:  # refused by the route's model, not by the depth limit
        assert "max_depth" not in json.dumps(response.json())


async def test_tool_arguments_300_deep_are_a_validation_error_over_rest_and_mcp(demo: System) -> None:
    arguments = {"text": nested(300)}
    rest = await demo.api.post("/api/v1/tools/call", json={"name": "demo.echo", "arguments": arguments})
    assert_validation_error(rest)
    session = await mcp_session_id(demo)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "demo.echo", "arguments": arguments}}
    mcp = await demo.api.post(mcp_url(demo), json=call, headers={**MCP_HEADERS, "mcp-session-id": session})
    assert_validation_error(mcp)
    # the same call within the limit is served
    shallow = await demo.api.post("/api/v1/tools/call", json={"name": "demo.echo", "arguments": {"text": "ok"}})
    assert shallow.status_code == 200, shallow.text


@pytest.mark.parametrize("session_id", ["not a uuid", "x" * 5000, "a.b", "..", "a/b", "*", ">", ""])
async def test_a_malformed_mcp_session_id_is_a_bad_request(system: System, session_id: str) -> None:
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for method, body in (("POST", listing), ("GET", None), ("DELETE", None)):
        response = await system.api.request(
            method, mcp_url(system), json=body, headers={**MCP_HEADERS, "mcp-session-id": session_id}
        )
        assert response.status_code == 400, (method, response.status_code, response.text)
        assert response.json()["error"]["message"] == "Bad Request: malformed Mcp-Session-Id header"


async def test_a_well_formed_unknown_mcp_session_id_is_not_found(system: System) -> None:
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = await system.api.post(mcp_url(system), json=listing, headers={**MCP_HEADERS, "mcp-session-id": "0" * 32})
    assert response.status_code == 404, response.text


@pytest.mark.parametrize(
    ("code", "field"),
    [
        ("toolmesh.search(query='echo', limit='many')", "limit"),
        ("toolmesh.search(query='echo', limit=0)", "limit"),
        ("toolmesh.search(query='echo', limit=1000)", "limit"),
        ("toolmesh.search(query='echo', server_filter=5)", "server_filter"),
        ("toolmesh.search(query='echo', server_filter='beta')", "server_filter"),
    ],
)
async def test_bad_code_mode_pack_arguments_are_a_tool_error_naming_the_field(
    system: System, code: str, field: str
) -> None:
    async with mcp_session(system, mode="search") as session:
        result = await session.call_tool("run", {"code": code})
        assert result.is_error is True, text_of(result)
        error: dict[str, Any] = json.loads(text_of(result))
        assert error["ok"] is False and "VALIDATION_ERROR: toolmesh.search(): " + field in error["error"], error
        # the snippet can catch it and go on, as any exception of its own
        snippet = f"r = 'missed'\ntry:\n    {code}\nexcept ValueError:\n    r = 'caught'\nr"
        caught = await session.call_tool("run", {"code": snippet})
        assert json.loads(text_of(caught))["result"] == "caught", text_of(caught)


async def test_code_mode_tool_arguments_300_deep_are_a_tool_error(demo: System) -> None:
    snippet = "x = 'x'\nfor i in range(300):\n    x = [x]\ndemo.echo(text=x)"
    async with mcp_session(demo, mode="search") as session:
        result = await session.call_tool("run", {"code": snippet})
        assert result.is_error is True, text_of(result)
        error = json.loads(text_of(result))["error"]
        assert "VALIDATION_ERROR" in error and "demo.echo" in error, error
