"""Scope step-up (issue 25; MCP authorization 2025-11-25, "Scope challenge handling"): the peer's
``admin_echo`` needs the scope ``admin`` that the first authorization (``mcp``, the metadata's scope)
did not ask for, and answers 403 ``insufficient_scope``. The call is refused with
``UPSTREAM_AUTHORIZATION_REQUIRED`` naming the scope, the authorization then asks for ``mcp admin``
(per-user: the caller's URL in the error; shared: an owner's ``POST .../authorize``), and once
authorized with it the call succeeds on the session already open. A user the authorization server
will not grant ``admin`` to is asked once: refused again for the same scope, the call fails without
another authorization URL, and each call reaches the upstream at most twice (no retry storm).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.oauth_peer import Peer, follow

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
CALL = "/api/v1/tools/call"
PER_USER = {"mode": "oauth", "identity": "per_user"}


def _scope(authorization_url: str) -> str:
    return parse_qs(urlsplit(authorization_url).query)["scope"][0]


async def _sign_in(system: System, token: str, authorization_url: str, peer: Peer, user: str) -> None:
    """Follow ``authorization_url`` signed in at the authorization server as ``user``, back to the gateway."""
    await peer.control("login", {"user": user})
    _, answer = await follow(authorization_url)
    async with system.client_as(token) as client:
        callback = await client.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})
    assert callback.status_code == 200, callback.text


async def _authorize(system: System, token: str, server_id: str, peer: Peer, user: str) -> str:
    """``token``'s principal authorizes the server as ``user``; the scope its URL asked for."""
    async with system.client_as(token) as client:
        started = await client.post(f"{SERVERS}/{server_id}/authorize")
    assert started.status_code == 200, started.text
    url: str = started.json()["authorization_url"]
    await _sign_in(system, token, url, peer, user)
    return _scope(url)


async def _call(system: System, token: str, tool: str) -> httpx.Response:
    async with system.client_as(token) as client:
        return await client.post(CALL, json={"name": f"saas.{tool}", "arguments": {"text": "hi"}})


async def _challenges(peer: Peer) -> int:
    count: int = (await peer.stats())["scope_challenges"]
    return count


async def test_per_user_step_up_asks_for_the_wider_scope_once(nats_url: str, database_url: str, peer: Peer) -> None:
    async with running_system(nats_url, database_url) as system:
        created = await system.register("saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER})
        server_id = created["id"]
        ann = await system.create_key("ann", "user")
        bob = await system.create_key("bob", "user")
        assert await _authorize(system, ann["token"], server_id, peer, "alice") == "mcp"
        await system.wait_connected(server_id)
        assert (await _call(system, ann["token"], "echo")).status_code == 200

        refused = await _call(system, ann["token"], "admin_echo")
        assert refused.status_code == 403, refused.text
        body = refused.json()
        assert body["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED"
        assert body["context"]["required_scope"] == "admin" and "scope admin" in body["detail"]
        assert _scope(body["authorization_url"]) == "mcp admin"  # the granted scope with the required one
        await _sign_in(system, ann["token"], body["authorization_url"], peer, "alice")
        stepped = await _call(system, ann["token"], "admin_echo")  # on the session already open
        assert stepped.status_code == 200, stepped.text
        assert stepped.json()["content"][0]["text"] == "admin: hi"
        assert (await _call(system, ann["token"], "whoami")).json()["content"][0]["text"] == "alice"

        # bob is not granted admin by the authorization server: asked once, then told it would not help.
        assert await _authorize(system, bob["token"], server_id, peer, "bob") == "mcp"
        first = await _call(system, bob["token"], "admin_echo")
        assert first.json()["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED", first.text
        await _sign_in(system, bob["token"], first.json()["authorization_url"], peer, "bob")
        before = await _challenges(peer)
        again = await _call(system, bob["token"], "admin_echo")
        assert again.status_code == 502, again.text
        final = again.json()
        assert final["error_code"] == "EXECUTION_FAILED" and "authorization_url" not in final
        assert final["context"]["required_scope"] == "admin" and "would not help" in final["detail"]
        assert await _challenges(peer) == before + 2  # the old token, then once with the new grant
        third = await _call(system, bob["token"], "admin_echo")
        assert third.json()["error_code"] == "EXECUTION_FAILED"
        assert await _challenges(peer) == before + 3
        row = await system.backends.db.fetchrow(
            "SELECT wanted_scope FROM mcp.upstream_tokens WHERE server_id = $1 AND principal = $2", server_id, bob["id"]
        )
        assert row is not None and row["wanted_scope"] is None  # nothing left to ask for
        assert (await _call(system, bob["token"], "whoami")).json()["content"][0]["text"] == "bob"


async def test_shared_step_up_names_who_authorizes_and_authorize_asks_for_the_scope(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    async with running_system(nats_url, database_url) as system:
        created = await system.register("saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": {"mode": "oauth"}})
        server_id = created["id"]

        async def waiting() -> dict[str, Any] | None:
            detail = await system.server(server_id)
            return detail if "needs authorization" in (detail["error_message"] or "") else None

        await eventually(waiting, what="the server to wait for an authorization")
        admin = ADMIN_TOKEN
        assert await _authorize(system, admin, server_id, peer, "alice") == "mcp"
        await system.wait_connected(server_id)
        user = (await system.create_key("dan", "user"))["token"]

        refused = await _call(system, user, "admin_echo")
        assert refused.status_code == 403, refused.text
        body = refused.json()
        assert body["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED" and "authorization_url" not in body
        assert "an owner or admin authorizes it again" in body["detail"] and "scope admin" in body["detail"]
        assert body["context"]["scope"] == "mcp admin"
        assert (await system.server(server_id))["status"] == "CONNECTED"  # its other tools still serve

        assert await _authorize(system, admin, server_id, peer, "alice") == "mcp admin"
        stepped = await _call(system, user, "admin_echo")
        assert stepped.status_code == 200, stepped.text
        assert stepped.json()["content"][0]["text"] == "admin: hi"
