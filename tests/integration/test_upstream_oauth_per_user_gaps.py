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
