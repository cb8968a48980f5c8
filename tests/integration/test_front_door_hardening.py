"""Front-door hardening through a running gateway: Origin/Host on /mcp, body limit, rate limit, strict bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_client import mcp_url
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT

pytestmark = pytest.mark.integration
MCP_HEADERS = {**MCP_ACCEPT, "Authorization": f"Bearer {ADMIN_TOKEN}"}
LIMIT = 64 * 1024


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(
        nats_url, database_url, roles=["gateway", "projector"], max_request_body_bytes=LIMIT
    ) as running:
        yield running


async def test_mcp_refuses_foreign_origins_and_rebound_hosts(system: System) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        foreign = await http.post(
            mcp_url(system), json=INITIALIZE, headers={**MCP_HEADERS, "Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        assert foreign.json()["error_code"] == "FORBIDDEN" and foreign.json()["context"] == {
            "origin": "http://evil.example"
        }
        local = await http.post(
            mcp_url(system), json=INITIALIZE, headers={**MCP_HEADERS, "Origin": "http://localhost:5173"}
        )
        assert local.status_code == 200, local.text
        plain = await http.post(mcp_url(system, "search"), json=INITIALIZE, headers=MCP_HEADERS)
        assert plain.status_code == 200, plain.text
        rebound = await http.post(mcp_url(system), json=INITIALIZE, headers={**MCP_HEADERS, "Host": "rebound.example"})
        assert rebound.status_code == 403 and rebound.json()["context"] == {"host": "rebound.example"}
        named = await http.post(
            mcp_url(system, path="/mcp/some-endpoint"),
            json=INITIALIZE,
            headers={**MCP_HEADERS, "Origin": "http://evil.example"},
        )
        assert named.status_code == 403 and named.json()["context"] == {"origin": "http://evil.example"}
        # REST takes bearer tokens only (no cookies), so a browser's Origin is no threat there.
        rest = await system.api.get("/api/v1/aggregator/servers", headers={"Origin": "http://evil.example"})
        assert rest.status_code == 200


async def test_mcp_paths_with_a_trailing_slash_are_redirected(system: System) -> None:
    """``/mcp/`` and ``/mcp/{name}/`` answer 307 to the path without the slash, as FastAPI does for REST."""
    for path, target in (("/mcp/", "/mcp"), ("/mcp/some-endpoint/", "/mcp/some-endpoint")):
        answered = await system.api.post(f"{path}?mode=all", json=INITIALIZE, headers=MCP_HEADERS)
        assert answered.status_code == 307, (path, answered.status_code)
        assert answered.headers["location"] == f"{system.api.base_url.join(target)}?mode=all"


async def test_bodies_over_the_limit_get_413_everywhere(system: System) -> None:
    big = {"name": "x" * LIMIT}
    expected = {
        "detail": f"Request body is larger than {LIMIT} bytes",
        "error_code": "PAYLOAD_TOO_LARGE",
        "context": {"max_bytes": LIMIT},
    }
    for path in ("/api/v1/tools/call", "/api/v1/aggregator/servers", "/api/v1/search"):
        response = await system.api.post(path, json=big)
        assert (response.status_code, response.json()) == (413, expected), path

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "'
        for _ in range(LIMIT // 1024 + 1):
            yield b"x" * 1024
        yield b'"}}'

    async with httpx.AsyncClient(timeout=10) as http:
        streamed = await http.post(
            mcp_url(system), content=chunks(), headers={**MCP_HEADERS, "Content-Type": "application/json"}
        )
    assert (streamed.status_code, streamed.json()) == (413, expected)
    named = await system.api.post("/mcp/some-endpoint", json=big, headers=MCP_HEADERS)
    assert (named.status_code, named.json()) == (413, expected)
    under = await system.api.post(
        "/api/v1/tools/call", json={"name": "nope.x", "arguments": {"pad": "x" * (LIMIT // 2)}}
    )
    assert under.status_code == 404 and under.json()["error_code"] == "TOOL_NOT_FOUND"


async def test_typos_in_request_bodies_get_422(system: System) -> None:
    cases = [
        ("/api/v1/search", {"query": "x", "server_fliter": ["github"]}, ["body", "server_fliter"]),
        (
            "/api/v1/aggregator/servers",
            {"name": "x", "transport_type": "HTTP", "connection_config": {"base_url": "https://h", "header": {}}},
            ["body", "connection_config", "header"],
        ),
        ("/api/v1/tools/call", {"name": "a.b", "argument": {}}, ["body", "argument"]),
        ("/api/v1/aggregator/servers/00000000-0000-0000-0000-000000000000/disconnect", {"froce": True}, None),
    ]
    for path, body, loc in cases:
        response = await system.api.post(path, json=body)
        assert response.status_code == 422, (path, response.text)
        assert response.json()["error_code"] == "VALIDATION_ERROR"
        if loc is not None:
            assert [e["loc"] for e in response.json()["detail"]] == [loc]


async def test_a_principal_over_its_rate_gets_429_with_retry_after(nats_url: str, database_url: str) -> None:
    async with running_system(
        nats_url, database_url, roles=["gateway", "projector"], rate_limit_per_second=0.2, rate_limit_burst=5
    ) as system:

        async def refused() -> httpx.Response | None:
            response = await system.api.get("/api/v1/aggregator/servers")
            return response if response.status_code == 429 else None

        response = await eventually(refused, timeout=30, what="the bucket to run dry")
        assert response.json()["error_code"] == "RATE_LIMITED"
        assert int(response.headers["retry-after"]) >= 1
        async with httpx.AsyncClient(timeout=10) as http:
            mcp = await http.post(mcp_url(system), json=INITIALIZE, headers=MCP_HEADERS)
        assert mcp.status_code == 429 and int(mcp.headers["retry-after"]) >= 1
        assert mcp.json()["error_code"] == "RATE_LIMITED"
        unauthenticated = await system.api.get("/api/v1/aggregator/servers", headers={"Authorization": "Bearer x"})
        assert unauthenticated.status_code == 401  # the bucket is the principal's, not the address's
