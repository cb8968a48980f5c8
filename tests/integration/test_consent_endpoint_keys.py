"""The consent page's API for a key limited to MCP endpoints: it may allow an MCP client at its own
endpoints (the token then acts as that key there and nowhere else), and at no other path."""

from __future__ import annotations

import pytest

from tests.connected_apps import decide, exchange, mcp_status, start_authorization
from tests.harness import System

pytestmark = pytest.mark.integration


async def test_an_endpoint_limited_key_allows_a_client_at_its_own_endpoint_only(system: System) -> None:
    base = str(system.api.base_url).rstrip("/")
    made = await system.api.post("/api/v1/endpoints", json={"name": "dev", "include": ["*"]})
    assert made.status_code == 201, made.text
    limited = (await system.create_key("dev-only", "user", endpoints=["dev"]))["token"]

    pending = await start_authorization(base, endpoint="/mcp/dev")
    async with system.client_as(limited) as page:
        shown = await page.get(f"/api/v1/oauth/requests/{pending.request_id}")
    assert shown.status_code == 200, shown.text
    assert shown.json()["endpoint"] == "/mcp/dev"
    allowed = await decide(base, pending, limited)
    assert allowed.status_code == 200, allowed.text
    tokens = await exchange(base, pending, allowed.json()["redirect_to"])
    assert await mcp_status(base, tokens["access_token"], "/mcp/dev") == 200
    assert await mcp_status(base, tokens["access_token"], "/mcp") == 401

    aggregate = await start_authorization(base, endpoint="/mcp")
    refused = await decide(base, aggregate, limited)
    assert refused.status_code == 403 and refused.json()["error_code"] == "FORBIDDEN", refused.text
    async with system.client_as(limited) as rest:  # the rest of the REST API stays closed to it
        assert (await rest.get("/api/v1/aggregator/servers")).status_code == 403
