"""An MCP client ends its own grant at ``/revoke`` (RFC 7009) the way public clients do: with its
``client_id`` and the token, no secret; the token is refused at ``/mcp`` from then on."""

from __future__ import annotations

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, System
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT
from tests.oauth_client_flow import Client, registered, signed_in

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("kind", ["access", "refresh"])
async def test_a_public_client_revokes_its_grant_with_its_client_id_alone(system: System, kind: str) -> None:
    registration: Client = await registered(system.api)
    tokens = await signed_in(system.api, ADMIN_TOKEN, client=registration)
    bearer = {"Authorization": f"Bearer {tokens.access}"}
    async with httpx.AsyncClient(base_url=system.api.base_url, timeout=30) as client:
        revoked = await client.post(
            "/revoke", data={"token": getattr(tokens, kind), "client_id": registration.client_id}
        )
        assert revoked.status_code == 200, revoked.text
        assert revoked.headers["cache-control"] == "no-store"
        refused = await client.post("/mcp", json=INITIALIZE, headers=bearer | MCP_ACCEPT)
        assert refused.status_code == 401
        unknown = await client.post("/revoke", data={"token": "tmo_unknown", "client_id": registration.client_id})
        assert unknown.status_code == 200


async def test_revoking_asks_who_the_client_is(system: System) -> None:
    async with httpx.AsyncClient(base_url=system.api.base_url, timeout=30) as client:
        anonymous = await client.post("/revoke", data={"token": "tmo_unknown"})
    assert anonymous.status_code == 401 and anonymous.json()["error"] == "invalid_client"
