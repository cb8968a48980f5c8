"""OPENAPI servers registered with ``auth`` (issue 31), end to end against the OAuth peer described by
an OpenAPI document (``tests/peers/oauth_openapi.py``): the server waits for an authorization, the
authorization server is the one the document's oauth2 scheme names (no challenge), and calls of the
operations that scheme guards carry the grant's access token — the shared identity's, or each
principal's own, never another's; a document whose endpoints point at a link-local or metadata host
is refused before anything is fetched from them.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import System, eventually, running_system
from tests.leaks import assert_nowhere, captured_logs
from tests.oauth_peer import Peer, follow, stream_text
from tests.peers.launch import free_port, running_process

pytestmark = pytest.mark.integration
PEER = Path(__file__).parents[1] / "peers" / "oauth_openapi.py"
SERVERS = "/api/v1/aggregator/servers"
CALL = "/api/v1/tools/call"
WHOAMI = {"body": {"tool": "whoami"}}


class ApiPeer(Peer):
    """The OAuth peer with its OpenAPI face."""

    async def seen(self) -> list[str]:
        """The ``Authorization`` header of every request to the API, in order."""
        async with httpx.AsyncClient() as client:
            found: list[str] = (await client.get(f"{self.origin}/control/seen")).json()["authorization"]
            return found


@pytest.fixture
async def api_peer() -> AsyncIterator[ApiPeer]:
    port = free_port()
    async with running_process([sys.executable, str(PEER), "--port", str(port)], port=port):
        yield ApiPeer(f"http://127.0.0.1:{port}")


def _config(peer: Peer, identity: str) -> dict[str, Any]:
    return {"spec_url": f"{peer.origin}/openapi.json", "auth": {"mode": "oauth", "identity": identity}}


async def _waits_for_authorization(system: System, server_id: str) -> None:
    async def waiting() -> bool:
        return bool((await system.server(server_id))["needs_authorization"])

    await eventually(waiting, what="the OpenAPI server to wait for an authorization")


async def _authorize_as(client: httpx.AsyncClient, server_id: str, peer: Peer, user: str) -> str:
    """``client``'s principal authorizes the server, signed in upstream as ``user``; the callback's body."""
    await peer.control("login", {"user": user})
    started = await client.post(f"{SERVERS}/{server_id}/authorize")
    assert started.status_code == 200, started.text
    assert started.json()["authorization_url"].startswith(f"{peer.origin}/authorize?")
    _, answer = await follow(started.json()["authorization_url"])
    callback = await client.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})
    assert callback.status_code == 200, callback.text
    return callback.text


def _user(called: httpx.Response) -> str:
    assert called.status_code == 200, called.text
    user: str = called.json()["structuredContent"]["user"]
    return user


async def test_shared_openapi_server_calls_the_api_with_the_grants_bearer_token(
    nats_url: str, database_url: str, api_peer: ApiPeer
) -> None:
    bodies: list[str] = []
    with captured_logs() as logs:
        async with running_system(nats_url, database_url) as system:
            server_id = (await system.register("tracker", "OPENAPI", _config(api_peer, "shared")))["id"]
            await _waits_for_authorization(system, server_id)
            assert await api_peer.seen() == []  # nothing reached the API without a grant

            bodies.append(await _authorize_as(system.api, server_id, api_peer, "alice"))
            await system.wait_connected(server_id)
            called = await system.api.post(CALL, json={"name": "tracker.execute", "arguments": WHOAMI})
            assert _user(called) == "alice"
            bodies.append(called.text)
            access = (await api_peer.stats())["issued"][0]
            assert await api_peer.seen() == [f"Bearer {access}"]

            assert (await api_peer.control("expire"))["expired"] >= 1
            again = await system.api.post(CALL, json={"name": "tracker.execute", "arguments": WHOAMI})
            assert _user(again) == "alice"  # refreshed on the 401, the caller saw nothing
            stats = await api_peer.stats()
            assert stats["refresh_grants"] == 1
            assert (await api_peer.seen())[-2:] == [f"Bearer {access}", f"Bearer {stats['issued'][2]}"]

            open_one = await system.api.post(CALL, json={"name": "tracker.health", "arguments": {}})
            assert open_one.status_code == 200 and open_one.json()["isError"] is True  # the peer wants a token
            assert (await api_peer.seen())[-1] == ""  # but the document asks none: none was sent
            bodies.append(open_one.text)

            rows = await system.backends.db.fetch("SELECT * FROM mcp.upstream_tokens")
            assert len(rows) == 1 and rows[0]["issuer"].rstrip("/") == api_peer.origin
            stored = repr([dict(r) for r in rows])
            events = await stream_text(system.backends.js)
    issued = (await api_peer.stats())["issued"]
    assert_nowhere(issued, responses="\n".join(bodies), database=stored, events=events, logs=logs.getvalue())


async def test_a_per_user_openapi_server_never_sends_one_principals_token_for_another(
    nats_url: str, database_url: str, api_peer: ApiPeer
) -> None:
    async with running_system(nats_url, database_url) as system:
        server_id = (await system.register("tracker", "OPENAPI", _config(api_peer, "per_user")))["id"]
        await _waits_for_authorization(system, server_id)
        ann = (await system.create_key("ann", "user"))["token"]
        bob = (await system.create_key("bob", "user"))["token"]
        async with system.client_as(ann) as as_ann, system.client_as(bob) as as_bob:
            await _authorize_as(as_ann, server_id, api_peer, "alice")
            await system.wait_connected(server_id)
            assert _user(await as_ann.post(CALL, json={"name": "tracker.execute", "arguments": WHOAMI})) == "alice"
            anns = {f"Bearer {token}" for token in (await api_peer.stats())["issued"]}

            refused = await as_bob.post(CALL, json={"name": "tracker.execute", "arguments": WHOAMI})
            assert refused.status_code == 403, refused.text
            assert refused.json()["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED"
            assert refused.json()["authorization_url"].startswith(f"{api_peer.origin}/authorize?")
            seen = await api_peer.seen()
            assert seen and set(seen) <= anns  # only ann's token ever reached the API

            await _authorize_as(as_bob, server_id, api_peer, "bob")
            assert _user(await as_bob.post(CALL, json={"name": "tracker.execute", "arguments": WHOAMI})) == "bob"
            assert _user(await as_ann.post(CALL, json={"name": "tracker.execute", "arguments": WHOAMI})) == "alice"


def _hostile(scheme: dict[str, Any]) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "hostile", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "security": [{"s": []}],
        "components": {"securitySchemes": {"s": scheme}},
        "paths": {"/x": {"get": {"operationId": "x", "responses": {"200": {"description": "ok"}}}}},
    }


def _code_flow(authorize: str, token: str) -> dict[str, Any]:
    return {"type": "oauth2", "flows": {"authorizationCode": {"authorizationUrl": authorize, "tokenUrl": token}}}


@pytest.mark.parametrize(
    ("scheme", "named"),
    [
        (_code_flow("https://as.example.com/authorize", "http://169.254.169.254/token"), "tokenUrl"),
        (_code_flow("http://metadata.google.internal/authorize", "https://as.example.com/token"), "authorizationUrl"),
        (
            {"type": "openIdConnect", "openIdConnectUrl": "http://[fd00:ec2::254]/.well-known/openid-configuration"},
            "openIdConnectUrl",
        ),
    ],
)
async def test_a_document_pointing_oauth_at_a_metadata_host_is_refused(
    nats_url: str, database_url: str, scheme: dict[str, Any], named: str
) -> None:
    async with running_system(nats_url, database_url) as system:
        # a pre-registered client: no registration step that could fail first
        config = {"spec": _hostile(scheme), "auth": {"mode": "oauth", "client_id": "toolmesh"}}
        server_id = (await system.register("hostile", "OPENAPI", config))["id"]
        await _waits_for_authorization(system, server_id)
        started = await system.api.post(f"{SERVERS}/{server_id}/authorize")
        assert started.status_code == 503, started.text
        assert started.json()["error_code"] == "SERVER_CONNECTION_FAILED"
        detail = started.json()["detail"]
        assert f"the document's {named}" in detail and "refused by the egress policy" in detail
