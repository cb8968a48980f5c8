"""Upstream OAuth for REST tool servers (issue 25 item 1), end to end against the OAuth peer serving
the REST tool protocol (``tests/peers/oauth_server.py --transport rest``): a REST server registered
with ``auth`` waits for an authorization, discovery finds its authorization server from the 401 of
its ``GET /tools``, and every request (health, tool listing, calls) then carries the grant's access
token, so calls reach the upstream as the authorized user — one shared identity, or each principal's
own; an access token the upstream stopped accepting is refreshed on its 401, one about to expire
before it is sent; and no token is ever in a response, a log line, an event or a database row.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.harness import System, eventually, running_system
from tests.leaks import assert_nowhere, captured_logs
from tests.oauth_peer import PEER, Peer, follow, stream_text
from tests.peers.launch import free_port, running_process

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
CALL = "/api/v1/tools/call"
SHARED = {"mode": "oauth", "identity": "shared"}
PER_USER = {"mode": "oauth", "identity": "per_user"}


@pytest.fixture
async def rest_peer() -> AsyncIterator[Peer]:
    """The OAuth peer serving the REST tool protocol at ``/api``, its signed-in user ``alice``."""
    port = free_port()
    argv = [sys.executable, str(PEER), "--port", str(port), "--user", "alice", "--transport", "rest"]
    async with running_process(argv, port=port):
        yield Peer(f"http://127.0.0.1:{port}")


async def _waits_for_authorization(system: System, server_id: str) -> None:
    async def waiting() -> bool:
        detail = await system.server(server_id)
        return bool(detail["needs_authorization"])

    await eventually(waiting, what="the REST server to wait for an authorization")


async def _authorize_as(system: System, client: httpx.AsyncClient, server_id: str, peer: Peer, user: str) -> str:
    """``client``'s principal authorizes the server, signed in upstream as ``user``; the callback's body."""
    await peer.control("login", {"user": user})
    started = await client.post(f"{SERVERS}/{server_id}/authorize")
    assert started.status_code == 200, started.text
    assert started.json()["authorization_url"].startswith(f"{peer.origin}/authorize?")
    _, answer = await follow(started.json()["authorization_url"])
    callback = await client.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})
    assert callback.status_code == 200, callback.text
    return callback.text


async def _call(client: httpx.AsyncClient, tool: str, arguments: dict[str, Any] | None = None) -> httpx.Response:
    return await client.post(CALL, json={"name": tool, "arguments": arguments or {}})


def _user(called: httpx.Response) -> str:
    assert called.status_code == 200, called.text
    user: str = called.json()["structuredContent"]["user"]
    return user


async def test_shared_rest_server_is_called_with_the_grant_and_refreshed_on_401(
    nats_url: str, database_url: str, rest_peer: Peer
) -> None:
    bodies: list[str] = []
    with captured_logs() as logs:
        async with running_system(nats_url, database_url) as system:
            created = await system.register("tracker", "REST", {"url": f"{rest_peer.origin}/api", "auth": SHARED})
            server_id = created["id"]
            await _waits_for_authorization(system, server_id)
            assert (await rest_peer.stats()).get("bearer_requests", 0) == 0  # nothing without a grant

            bodies.append(await _authorize_as(system, system.api, server_id, rest_peer, "alice"))
            await system.wait_connected(server_id)  # health and the tool list went with the token
            first = await _call(system.api, "tracker.whoami")
            assert _user(first) == "alice"
            bodies.append(first.text)

            assert (await rest_peer.control("expire"))["expired"] >= 1
            second = await _call(system.api, "tracker.echo", {"text": "after expiry"})
            assert second.status_code == 200, second.text  # refreshed on the 401, the caller saw nothing
            assert second.json()["structuredContent"] == {"text": "after expiry"}
            bodies.append(second.text)
            stats = await rest_peer.stats()
            assert stats["code_grants"] == 1 and stats["refresh_grants"] == 1
            assert stats["bearer_requests"] >= 4  # health, tools, and both calls carried a token

            bodies.append(repr(await system.server(server_id)))
            db = system.backends.db
            rows = await db.fetch("SELECT * FROM mcp.upstream_tokens")
            assert len(rows) == 1 and rows[0]["issuer"].rstrip("/") == rest_peer.origin
            stored = repr([dict(r) for r in rows]) + repr(await db.fetch("SELECT * FROM mcp.external_servers"))
            events = await stream_text(system.backends.js)
    issued = (await rest_peer.stats())["issued"]
    assert len(issued) == 4  # two access and two refresh tokens
    assert_nowhere(issued, responses="\n".join(bodies), database=stored, events=events, logs=logs.getvalue())


async def test_per_user_rest_server_reaches_the_upstream_as_each_callers_own_user(
    nats_url: str, database_url: str, rest_peer: Peer
) -> None:
    bodies: list[str] = []
    with captured_logs() as logs:
        async with running_system(nats_url, database_url) as system:
            created = await system.register("tracker", "REST", {"url": f"{rest_peer.origin}/api", "auth": PER_USER})
            server_id = created["id"]
            await _waits_for_authorization(system, server_id)
            ann = (await system.create_key("ann", "user"))["token"]
            bob = (await system.create_key("bob", "user"))["token"]
            cat = (await system.create_key("cat", "user"))["token"]
            async with (
                system.client_as(ann) as as_ann,
                system.client_as(bob) as as_bob,
                system.client_as(cat) as as_cat,
            ):
                bodies.append(await _authorize_as(system, as_ann, server_id, rest_peer, "alice"))
                await system.wait_connected(server_id)  # discovered with ann's grant
                assert _user(await _call(as_ann, "tracker.whoami")) == "alice"
                bodies.append(await _authorize_as(system, as_bob, server_id, rest_peer, "bob"))
                as_bob_called = await _call(as_bob, "tracker.whoami")
                assert _user(as_bob_called) == "bob"
                assert _user(await _call(as_ann, "tracker.whoami")) == "alice"
                bodies.append(as_bob_called.text)

                refused = await _call(as_cat, "tracker.whoami")
                assert refused.status_code == 403, refused.text
                assert refused.json()["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED"
                assert refused.json()["authorization_url"].startswith(f"{rest_peer.origin}/authorize?")

                before = (await rest_peer.stats())["refresh_grants"]
                assert (await rest_peer.control("expire"))["expired"] >= 2
                assert _user(await _call(as_bob, "tracker.whoami")) == "bob"  # refreshed on the 401, unnoticed
                assert (await rest_peer.stats())["refresh_grants"] > before

                forbidden = await _call(as_bob, "tracker.forbidden")  # the application says no: no re-authorizing
                assert forbidden.status_code == 502 and forbidden.json()["error_code"] == "EXECUTION_FAILED"
                assert _user(await _call(as_bob, "tracker.whoami")) == "bob"  # its session still serves it

                await rest_peer.control("revoke")  # the users withdrew toolmesh's access at the provider
                withdrawn = await _call(as_bob, "tracker.whoami")
                assert withdrawn.status_code == 403, withdrawn.text  # authorize again, not a 502
                assert withdrawn.json()["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED"
                assert withdrawn.json()["authorization_url"].startswith(f"{rest_peer.origin}/authorize?")
            rows = await system.backends.db.fetch("SELECT * FROM mcp.upstream_tokens")
            assert len(rows) == 2
            stored = repr([dict(r) for r in rows])
            events = await stream_text(system.backends.js)
    issued = (await rest_peer.stats())["issued"]
    assert_nowhere(issued, responses="\n".join(bodies), database=stored, events=events, logs=logs.getvalue())


async def test_an_access_token_about_to_expire_is_refreshed_before_it_is_sent(nats_url: str, database_url: str) -> None:
    """Tokens that live 6 s are refreshed in their last half (``REFRESH_MARGIN_SECONDS`` or half the
    lifetime): the call after 3.5 s goes out with a fresh token, and the upstream refuses nothing."""
    port = free_port()
    argv = [sys.executable, str(PEER), "--port", str(port), "--transport", "rest", "--access-seconds", "6"]
    async with running_process(argv, port=port):
        peer = Peer(f"http://127.0.0.1:{port}")
        async with running_system(nats_url, database_url) as system:
            created = await system.register("tracker", "REST", {"url": f"{peer.origin}/api", "auth": SHARED})
            await _authorize_as(system, system.api, created["id"], peer, "alice")
            await system.wait_connected(created["id"])
            before = await peer.stats()
            await asyncio.sleep(3.5)
            assert _user(await _call(system.api, "tracker.whoami")) == "alice"
            after = await peer.stats()
    assert after["refresh_grants"] > before["refresh_grants"]
    assert after.get("refused", 0) == before.get("refused", 0)  # no request went out with a stale token


async def test_a_withdrawn_grant_puts_the_rest_server_back_to_needing_authorization(
    nats_url: str, database_url: str, rest_peer: Peer
) -> None:
    fast_health = {"health_interval_seconds": 1.0, "health_check_timeout_seconds": 0.8}
    async with running_system(nats_url, database_url, **fast_health) as system:
        created = await system.register("tracker", "REST", {"url": f"{rest_peer.origin}/api", "auth": SHARED})
        await _authorize_as(system, system.api, created["id"], rest_peer, "alice")
        await system.wait_connected(created["id"])
        await rest_peer.control("revoke")
        refused = await _call(system.api, "tracker.echo", {"text": "x"})
        assert refused.status_code == 503, refused.text  # a shared grant refused: unavailable, said once
        said = "Server unavailable: tracker: the upstream refused the grant while calling echo"
        assert refused.json()["detail"] == said
        await _waits_for_authorization(system, created["id"])  # its /health refused even after a refresh
        assert (await rest_peer.stats())["refresh_grants"] == 0  # tried and refused, never granted


async def test_a_grant_withdrawn_from_a_per_user_rest_server_asks_the_user_to_authorize_again(
    nats_url: str, database_url: str, rest_peer: Peer
) -> None:
    """As for an MCP server: the 401 to a call (no refresh either) is 403 UPSTREAM_AUTHORIZATION_REQUIRED
    with the URL to authorize again, not 502 EXECUTION_FAILED (nor, for a JWT caller of a server with
    ``token_exchange``, a call that fails for good once its exchanged token expires)."""
    async with running_system(nats_url, database_url) as system:
        created = await system.register("tracker", "REST", {"url": f"{rest_peer.origin}/api", "auth": PER_USER})
        server_id = created["id"]
        await _authorize_as(system, system.api, server_id, rest_peer, "alice")
        await system.wait_connected(server_id)
        ida = (await system.create_key("ida", "user"))["token"]
        async with system.client_as(ida) as as_ida:
            await _authorize_as(system, as_ida, server_id, rest_peer, "bob")
            assert _user(await _call(as_ida, "tracker.whoami")) == "bob"
            await rest_peer.control("revoke")  # bob withdrew toolmesh's access at the provider: no refresh either
            refused = await _call(as_ida, "tracker.whoami")
        assert refused.status_code == 403, refused.text
        assert refused.json()["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED"
        assert refused.json()["authorization_url"].startswith(f"{rest_peer.origin}/authorize?")


async def test_a_per_user_rest_servers_scope_challenge_asks_for_the_wider_scope(
    nats_url: str, database_url: str, rest_peer: Peer
) -> None:
    """``admin_echo`` answers 403 insufficient_scope to a token without ``admin``: the caller gets its URL
    asking for ``mcp admin`` (as on an MCP server), and once authorized with it is served."""
    async with running_system(nats_url, database_url) as system:
        created = await system.register("tracker", "REST", {"url": f"{rest_peer.origin}/api", "auth": PER_USER})
        await _authorize_as(system, system.api, created["id"], rest_peer, "alice")
        await system.wait_connected(created["id"])
        refused = await _call(system.api, "tracker.admin_echo", {"text": "hi"})
        assert refused.status_code == 403, refused.text
        body = refused.json()
        assert body["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED" and body["context"]["required_scope"] == "admin"
        assert "scope=mcp+admin" in body["authorization_url"]
        _, answer = await follow(body["authorization_url"])
        assert (await system.api.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})).is_success
        stepped = await _call(system.api, "tracker.admin_echo", {"text": "hi"})
        assert stepped.status_code == 200, stepped.text
        assert stepped.json()["structuredContent"] == {"text": "admin: hi"}
