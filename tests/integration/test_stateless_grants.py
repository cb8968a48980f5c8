"""A per-user grant the upstream withdrew, met by a 2026-07-28 client relayed in that era: the client is
asked to authorize again, as a handshake-era client is (``UPSTREAM_AUTHORIZATION_REQUIRED``), not told
the server is unavailable."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import System, running_system
from tests.mcp_raw import modern_call
from tests.oauth_peer import Peer, follow

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
PER_USER = {"mode": "oauth", "identity": "per_user"}


async def _authorize_as(system: System, token: str, server_id: str, peer: Peer, user: str) -> None:
    await peer.control("login", {"user": user})
    async with system.client_as(token) as client:
        started = await client.post(f"{SERVERS}/{server_id}/authorize")
        assert started.status_code == 200, started.text
        _, answer = await follow(started.json()["authorization_url"])
        callback = await client.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})
    assert callback.status_code == 200, callback.text


async def _modern_whoami(system: System, token: str) -> dict[str, Any]:
    params = {"name": "whoami", "arguments": {}}
    return await modern_call(f"{system.api.base_url}/mcp/saas", "tools/call", params, token=token)


async def test_a_withdrawn_grant_asks_a_modern_client_to_authorize_again(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    async with running_system(nats_url, database_url) as system:
        created = await system.register("saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER})
        owner_grant = await system.api.post(f"{SERVERS}/{created['id']}/authorize")
        _, answer = await follow(owner_grant.json()["authorization_url"])
        assert (await system.api.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})).is_success
        await system.wait_connected(created["id"])
        key = await system.create_key("ida", "user")
        await _authorize_as(system, key["token"], created["id"], peer, "bob")
        served = await _modern_whoami(system, key["token"])
        assert served["result"]["content"][0]["text"] == "bob", served
        await peer.control("revoke")
        refused = await _modern_whoami(system, key["token"])
        assert refused["error"]["data"]["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED", refused
