"""Upstream OAuth with per-user identity (issue 25): one server registered once, every principal
authorizes for itself and its calls reach the upstream as its own user (the peer's authorization
server knows ``alice`` and ``bob``); a principal that has not authorized gets the URL to do so (REST)
or a URL-mode elicitation (``/mcp``); an expired access token is refreshed without the caller
noticing; revoking a key drops its grants; idle user sessions close; no token is ever in a
response, a log line, an event or a database row in plain text. The NATS API starts authorizations
too, and an authorization server that takes Client ID Metadata Documents gets the gateway's own.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import httpx2
import mcp_types
import pytest
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from nats.aio.client import Client as NATS

from tests.harness import System, eventually, running_system
from tests.leaks import assert_nowhere, captured_logs
from tests.mcp_client import mcp_url, text_of
from tests.oauth_peer import PEER, Peer, follow, stream_text
from tests.peers.launch import free_port, running_process
from toolmesh.platform import metrics
from toolmesh.redaction import process_redactor

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
CALL = "/api/v1/tools/call"
PER_USER = {"mode": "oauth", "identity": "per_user"}


async def _authorize_as(system: System, token: str, server_id: str, peer: Peer, user: str) -> None:
    """``token``'s principal authorizes the server, signed in at the authorization server as ``user``."""
    await peer.control("login", {"user": user})
    async with system.client_as(token) as client:
        started = await client.post(f"{SERVERS}/{server_id}/authorize")
        assert started.status_code == 200, started.text
        assert started.json()["identity"] == "per_user"
        _, answer = await follow(started.json()["authorization_url"])
        callback = await client.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})
    assert callback.status_code == 200, callback.text


async def _whoami(system: System, token: str) -> httpx.Response:
    async with system.client_as(token) as client:
        return await client.post(CALL, json={"name": "saas.whoami", "arguments": {}})


async def _elicit_nothing(context: ClientRequestContext, params: Any) -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action="decline")


async def _mcp_call_refused(system: System, token: str) -> MCPError:
    """``saas.whoami`` on ``/mcp`` by a client that declares URL-mode elicitation: the error it gets."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(mcp_url(system), http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=_elicit_nothing) as session,
    ):
        await session.initialize()
        with pytest.raises(MCPError) as refused:
            await session.call_tool("saas__whoami", {})
    return refused.value


async def test_each_principal_reaches_the_upstream_as_its_own_user(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    bodies: list[str] = []
    with captured_logs() as log_output:
        async with running_system(nats_url, database_url) as system:
            created = await system.register("saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER})
            server_id = created["id"]

            async def waiting() -> dict[str, Any] | None:
                detail = await system.server(server_id)
                return detail if "any user of the server" in (detail["error_message"] or "") else None

            await eventually(waiting, what="the server to wait for its first user's authorization")
            ann = await system.create_key("ann", "user")
            bob = await system.create_key("bob", "user")
            cat = await system.create_key("cat", "user")

            await _authorize_as(system, ann["token"], server_id, peer, "alice")
            await system.wait_connected(server_id)  # discovered with the first user's grant
            as_ann = await _whoami(system, ann["token"])
            assert as_ann.status_code == 200, as_ann.text
            assert as_ann.json()["content"][0]["text"] == "alice"

            await _authorize_as(system, bob["token"], server_id, peer, "bob")
            as_bob = await _whoami(system, bob["token"])
            assert as_bob.json()["content"][0]["text"] == "bob"
            assert (await _whoami(system, ann["token"])).json()["content"][0]["text"] == "alice"
            bodies += [as_ann.text, as_bob.text]

            refused = await _whoami(system, cat["token"])
            assert refused.status_code == 403, refused.text
            body = refused.json()
            assert body["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED"
            assert body["authorization_url"].startswith(f"{peer.origin}/authorize?")
            elicited = await _mcp_call_refused(system, cat["token"])
            assert elicited.error.code == mcp_types.URL_ELICITATION_REQUIRED
            asked = elicited.error.data["elicitations"][0]
            assert asked["mode"] == "url" and asked["url"].startswith(f"{peer.origin}/authorize?")
            async with system.client_as(cat["token"]) as as_cat:
                state = (await as_cat.get(f"{SERVERS}/{server_id}/authorization")).json()
            assert state["identity"] == "per_user" and state["authorized"] is False
            async with system.client_as(ann["token"]) as as_ann_client:
                state = (await as_ann_client.get(f"{SERVERS}/{server_id}/authorization")).json()
            assert state["authorized"] is True and state["issuer"].rstrip("/") == peer.origin

            before = (await peer.stats())["refresh_grants"]
            assert (await peer.control("expire"))["expired"] >= 2
            after_expiry = await _whoami(system, bob["token"])
            assert after_expiry.status_code == 200, after_expiry.text  # refreshed on the 401, unnoticed
            assert after_expiry.json()["content"][0]["text"] == "bob"
            assert (await peer.stats())["refresh_grants"] > before

            db = system.backends.db
            rows = await db.fetch("SELECT principal, sealed_grant FROM mcp.upstream_tokens ORDER BY principal")
            assert sorted(r["principal"] for r in rows) == sorted([ann["id"], bob["id"]])
            stored = repr([dict(r) for r in rows])
            events = await stream_text(system.backends.js)
            revoked = await system.api.delete(f"/api/v1/auth/keys/{bob['id']}")
            assert revoked.status_code == 204, revoked.text
            left = await db.fetch("SELECT principal FROM mcp.upstream_tokens")
            assert [r["principal"] for r in left] == [ann["id"]]  # bob's grant went with his key
            assert (await _whoami(system, bob["token"])).status_code == 401
            bodies.append(repr(await system.server(server_id)))
    issued = (await peer.stats())["issued"]
    assert len(issued) >= 6  # a grant each for alice and bob, and refreshed ones
    logs = log_output.getvalue()
    assert_nowhere(issued, responses="\n".join(bodies), database=stored, events=events, logs=logs)


async def test_a_user_cannot_authorize_for_a_shared_identity_but_may_for_its_own(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        shared = await system.register(
            "team", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": {"mode": "oauth"}}, auto_connect=False
        )
        own = await system.register(
            "mine", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER}, auto_connect=False
        )
        user = (await system.create_key("dan", "user"))["token"]
        async with system.client_as(user) as client:
            refused = await client.post(f"{SERVERS}/{shared['id']}/authorize")
            allowed = await client.post(f"{SERVERS}/{own['id']}/authorize")
        assert refused.status_code == 403 and refused.json()["error_code"] == "FORBIDDEN"
        assert allowed.status_code == 200, allowed.text
        assert (await peer.stats())["registrations"] == 1
        again = await system.api.post(f"{SERVERS}/{own['id']}/authorize")
        assert again.status_code == 200
        assert (await peer.stats())["registrations"] == 1  # the client registered once serves every user


def _user_sessions(event: str) -> float:
    return metrics.registry().get_sample_value("mcp_aggregator_user_sessions_total", {"event": event}) or 0.0


async def test_idle_user_sessions_close_and_open_again_on_the_next_call(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    async with running_system(nats_url, database_url, upstream_user_session_idle_seconds=0.5) as system:
        created = await system.register("saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER})
        key = await system.create_key("eve", "user")
        await _authorize_as(system, key["token"], created["id"], peer, "alice")
        await system.wait_connected(created["id"])
        opened, closed = _user_sessions("opened"), _user_sessions("closed")
        assert (await _whoami(system, key["token"])).json()["content"][0]["text"] == "alice"
        assert _user_sessions("opened") == opened + 1

        async def idle_closed() -> bool:
            return _user_sessions("closed") > closed

        await eventually(idle_closed, what="the idle user session to close")
        again = await _whoami(system, key["token"])
        assert again.status_code == 200 and again.json()["content"][0]["text"] == "alice"
        assert _user_sessions("opened") == opened + 2  # opened again for the next call


async def test_the_nats_api_starts_an_authorization_and_tells_the_state(
    nats_url: str, database_url: str, peer: Peer, nc: NATS
) -> None:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        created = await system.register(
            "saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER}, auto_connect=False
        )
        user = await system.create_key("fay", "user")

        async def ask(operation: str) -> dict[str, Any]:
            headers = {"Authorization": f"Bearer {user['token']}"}
            payload = json.dumps({"server_id": created["id"]}).encode()
            reply = await nc.request(f"toolmesh.api.v1.{operation}", payload, timeout=30, headers=headers)
            answer: dict[str, Any] = json.loads(reply.data)
            return answer

        refused = await ask("servers.authorize")  # no TOOLMESH_PUBLIC_URL: no callback URL to give
        assert refused["ok"] is False and refused["error"]["error_code"] == "VALIDATION_ERROR"
        assert "TOOLMESH_PUBLIC_URL" in refused["error"]["detail"]
        state = await ask("servers.authorization")
        assert state["ok"] is True and state["result"]["authorized"] is False
        assert state["result"]["identity"] == "per_user"


async def test_an_authorization_server_taking_client_documents_gets_the_gateways_own(
    nats_url: str, database_url: str
) -> None:
    peer_port, port = free_port(), free_port()
    public_url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, str(PEER), "--port", str(peer_port), "--cimd"]
    async with (
        running_process(argv, port=peer_port),
        running_system(nats_url, database_url, port=port, public_url=public_url) as system,
    ):
        peer = Peer(f"http://127.0.0.1:{peer_port}")
        document = (await system.api.get("/oauth/client-metadata.json")).json()
        assert document["client_id"] == f"{public_url}/oauth/client-metadata.json"
        assert document["redirect_uris"] == [f"{public_url}/oauth/callback"]
        created = await system.register("saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER})
        key = await system.create_key("gus", "user")
        await _authorize_as(system, key["token"], created["id"], peer, "alice")
        await system.wait_connected(created["id"])
        assert (await _whoami(system, key["token"])).json()["content"][0]["text"] == "alice"
        stats = await peer.stats()
        assert stats["registrations"] == 0 and stats["documents_fetched"] == 1  # no registration, one fetch


async def test_no_client_document_without_a_public_url(system: System) -> None:
    answer = await system.api.get("/oauth/client-metadata.json")
    assert answer.status_code == 404 and "TOOLMESH_PUBLIC_URL" in answer.json()["detail"]


async def test_a_key_revoked_while_its_authorization_is_under_way_gets_no_grant(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    """The grant of an authorization that comes back after its key was revoked is not stored: revoking
    dropped the key's grants, and none may appear for it afterwards (the server's own session would
    take it as the grant stored last)."""
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        created = await system.register(
            "saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER}, auto_connect=False
        )
        key = await system.create_key("fay", "user")
        async with system.client_as(key["token"]) as client:
            started = await client.post(f"{SERVERS}/{created['id']}/authorize")
        assert started.status_code == 200, started.text
        revoked = await system.api.delete(f"/api/v1/auth/keys/{key['id']}")
        assert revoked.status_code == 204, revoked.text
        _, answer = await follow(started.json()["authorization_url"])
        callback = await system.api.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})
        assert callback.status_code != 200, callback.text
        rows = await system.backends.db.fetch("SELECT principal FROM mcp.upstream_tokens")
        assert rows == []


async def test_authorizing_again_and_again_does_not_grow_the_log_redactor(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    """Every authorization's tokens are masked in the gateway's log, then retired: a key that
    authorizes in a loop (or a token exchange per request) does not make the redactor, and the cost of
    every log line, grow without end."""
    redactor = process_redactor()
    saved, redactor.retired_limit = redactor.retired_limit, 16
    try:
        async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
            created = await system.register(
                "saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER}, auto_connect=False
            )
            key = await system.create_key("gus", "user")
            await _authorize_as(system, key["token"], created["id"], peer, "alice")
            before = len(redactor)
            for _ in range(20):
                await _authorize_as(system, key["token"], created["id"], peer, "alice")
            assert len(redactor) - before <= 16
    finally:
        redactor.retired_limit = saved


async def test_a_user_key_does_not_choose_the_account_a_per_user_server_is_discovered_with(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    """The server's own session (discovery of tools, prompts, resources and instructions for the whole
    namespace; health) takes an owner's or admin's grant over a user's, whoever authorized last: a
    user-role key must not make its upstream account the one every caller's catalog is read from."""
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


async def test_a_grant_withdrawn_upstream_asks_the_user_to_authorize_again(
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
        assert (await _whoami(system, key["token"])).json()["content"][0]["text"] == "bob"
        await peer.control("revoke")  # bob withdrew toolmesh's access at the provider: no refresh either
        refused = await _whoami(system, key["token"])
        assert refused.status_code == 403, refused.text
        assert refused.json()["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED"
        assert refused.json()["authorization_url"].startswith(f"{peer.origin}/authorize?")


async def test_a_log_level_on_a_withdrawn_grant_asks_the_user_to_authorize_again(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    async with running_system(nats_url, database_url) as system:
        created = await system.register("saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": PER_USER})
        key = await system.create_key("joe", "user")
        await _authorize_as(system, key["token"], created["id"], peer, "alice")
        await system.wait_connected(created["id"])
        headers = {"Authorization": f"Bearer {key['token']}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(mcp_url(system, path="/mcp/saas"), http_client=http) as (read, write),
            ClientSession(read, write, elicitation_callback=_elicit_nothing) as session,
        ):
            await session.initialize()
            assert text_of(await session.call_tool("whoami", {})) == "alice"  # its own session is open
            await peer.control("revoke")
            with pytest.raises(MCPError) as refused:
                await session.set_logging_level("debug")
        assert refused.value.error.code == mcp_types.URL_ELICITATION_REQUIRED, refused.value.error
