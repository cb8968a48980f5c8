"""An MCP client that has never seen this gateway finds how to sign in from the 401 of ``/mcp``
(RFC 9728 → RFC 8414), signs in through the gateway's own authorization server, and uses ``/mcp``
with the token — and only ``/mcp``: the REST API refuses it."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, System
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT
from tests.oauth_client_flow import CONSENT_MARK, REDIRECT, Client, authorize, signed_in

pytestmark = pytest.mark.integration


async def test_a_client_discovers_the_authorization_server_from_the_401(system: System) -> None:
    base = str(system.api.base_url).rstrip("/")
    async with httpx.AsyncClient(base_url=base, timeout=30) as anonymous:
        refused = await anonymous.post("/mcp", json=INITIALIZE, headers=MCP_ACCEPT)
        assert refused.status_code == 401
        found = re.search(r'resource_metadata="([^"]+)"', refused.headers["www-authenticate"])
        assert found is not None, refused.headers["www-authenticate"]
        resource = (await anonymous.get(found.group(1))).json()
        assert resource["resource"] == f"{base}/mcp"
        (issuer,) = resource["authorization_servers"]
        metadata = (await anonymous.get(f"{issuer}/.well-known/oauth-authorization-server")).json()
    assert metadata["issuer"] == issuer == base
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["client_id_metadata_document_supported"] is True


async def test_the_token_opens_the_aggregate_and_nothing_else(system: System) -> None:
    tokens = await signed_in(system.api, ADMIN_TOKEN)
    assert tokens.access != ADMIN_TOKEN
    headers = {"Authorization": f"Bearer {tokens.access}"}
    async with httpx.AsyncClient(base_url=system.api.base_url, timeout=30) as client:
        opened = await client.post("/mcp", json=INITIALIZE, headers=headers | MCP_ACCEPT)
        assert opened.status_code == 200, opened.text
        refused = await client.get("/api/v1/aggregator/servers", headers=headers)
    assert refused.status_code == 403
    assert refused.json()["error_code"] == "FORBIDDEN"


async def test_a_client_registered_without_a_scope_may_ask_for_offline_access(system: System) -> None:
    """Clients commonly register naming no scope and ask for ``mcp offline_access`` at ``/authorize``."""
    async with httpx.AsyncClient(base_url=system.api.base_url, timeout=30) as http:
        answer = await http.post("/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})
        assert answer.status_code == 201, answer.text
        client = Client(answer.json()["client_id"])
        asked = await authorize(http, client, scope="mcp offline_access")
    assert asked.status_code == 302 and CONSENT_MARK in asked.headers["location"], asked.headers.get("location")
