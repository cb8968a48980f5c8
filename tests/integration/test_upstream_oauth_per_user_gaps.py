"""Known gaps of per-user upstream OAuth, kept as strict expected failures until they are closed
(see docs/security.md, "Known gaps").

An authorization URL is bound to the key that started it, not to the browser that completes it: a
user who gets a colleague to open its URL (sent in a chat, or the URL elicitation of its own client)
stores the colleague's upstream account under its own key, and from then on its calls act upstream
as the colleague. The authorization server usually asks no consent again, as the client is the same
one every user of the server already approved.
"""

from __future__ import annotations

import pytest

from tests.harness import running_system
from tests.oauth_peer import Peer, follow

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
PER_USER = {"mode": "oauth", "identity": "per_user"}


@pytest.mark.xfail(strict=True, reason="the callback cannot tell who completed an authorization URL")
async def test_an_authorization_url_completed_by_a_colleague_does_not_become_the_starters_grant(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    async with running_system(nats_url, database_url) as system:
        created = await system.register("saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER})
        mallory = await system.create_key("mallory", "user")
        async with system.client_as(mallory["token"]) as client:
            started = await client.post(f"{SERVERS}/{created['id']}/authorize")
        assert started.status_code == 200, started.text
        # mallory sends the URL to bob, who is signed in at the authorization server and opens it
        await peer.control("login", {"user": "bob"})
        _, answer = await follow(started.json()["authorization_url"])
        callback = await system.api.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})
        assert callback.status_code == 200, callback.text
        await system.wait_connected(created["id"])
        async with system.client_as(mallory["token"]) as client:
            called = await client.post("/api/v1/tools/call", json={"name": "saas.whoami", "arguments": {}})
        assert called.status_code == 200, called.text
        assert called.json()["content"][0]["text"] != "bob"  # mallory's calls act as bob upstream


@pytest.mark.xfail(strict=True, reason="a per-user server's own session uses the grant stored last, anyone's")
async def test_a_user_key_does_not_choose_the_account_a_per_user_server_is_discovered_with(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    """The server's own session (discovery of tools, prompts, resources and instructions for the whole
    namespace; health) takes the grant stored last: a user-role key that authorizes, or whose token is
    refreshed, last makes its upstream account the one the catalog is read from; the resources, prompts
    and tools that account sees are listed to every caller of the namespace."""
    async with running_system(nats_url, database_url) as system:
        created = await system.register("saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER})
        server_id = created["id"]
        await peer.control("login", {"user": "alice"})
        started = await system.api.post(f"{SERVERS}/{server_id}/authorize")  # the owner
        _, answer = await follow(started.json()["authorization_url"])
        assert (await system.api.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})).is_success
        await system.wait_connected(server_id)
        mallory = await system.create_key("mallory", "user")
        await peer.control("login", {"user": "mallory"})
        async with system.client_as(mallory["token"]) as client:
            started = await client.post(f"{SERVERS}/{server_id}/authorize")
            _, answer = await follow(started.json()["authorization_url"])
            assert (await client.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})).is_success
        assert (await system.api.post(f"{SERVERS}/{server_id}/disconnect", json={"force": True})).is_success
        assert (await system.api.post(f"{SERVERS}/{server_id}/connect")).is_success
        await system.wait_connected(server_id)
        assert (await peer.stats()).get("bearer_requests_of_mallory", 0) == 0  # mallory never called
