"""Upstream OAuth in shared identity (issue 25), end to end against an OAuth-protected MCP peer with
its own authorization server (``tests/peers/oauth_server.py``): registered with ``auth.mode: oauth``
the server waits for an authorization instead of retrying; an owner authorizes it (the authorization
URL fetched headless, its code brought to the gateway's callback); calls then reach the upstream as
the authorized user, an access token the upstream stopped accepting is refreshed without the caller
noticing; an agent cannot authorize; a used or forged ``state`` is refused; a credential-key rotation
reseals the grant so the server stays authorized once the old key is dropped; and no token is ever in
a response, a log line, an event or a database row in plain text.
"""

from __future__ import annotations

import base64
import hashlib
import sys
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import pytest

from tests.harness import System, eventually, running_system
from tests.leaks import assert_nowhere, captured_logs
from tests.oauth_peer import PEER, Peer, follow, stream_text
from tests.peers.launch import free_port, running_process
from toolmesh.credentials import CredentialBox

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
CALL = "/api/v1/tools/call"


async def _authorize(system: System, server_id: str) -> tuple[str, dict[str, list[str]]]:
    """Start an authorization as the owner; the authorization server's redirect back (headless)."""
    response = await system.api.post(f"{SERVERS}/{server_id}/authorize")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["expires_in"] > 0
    return await follow(body["authorization_url"])


async def _callback(system: System, answer: dict[str, list[str]]) -> httpx.Response:
    """The authorization server's redirect (``answer``, its query) followed to the gateway's callback."""
    return await system.api.get("/oauth/callback", params={k: v[0] for k, v in answer.items()})


async def _authorized(system: System, name: str, peer: Peer) -> str:
    """A server of ``peer`` registered with OAuth as ``name``, authorized by the owner and connected; its id."""
    created = await system.register(name, "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": {"mode": "oauth"}})
    server_id: str = created["id"]
    await _waits_for_authorization(system, server_id)
    _, answer = await _authorize(system, server_id)
    assert (await _callback(system, answer)).status_code == 200
    await system.wait_connected(server_id)
    return server_id


async def _call(system: System, name: str, arguments: dict[str, Any] | None = None) -> httpx.Response:
    return await system.api.post(CALL, json={"name": name, "arguments": arguments or {}})


async def _waits_for_authorization(system: System, server_id: str) -> dict[str, Any]:
    async def waiting() -> dict[str, Any] | None:
        detail = await system.server(server_id)
        return detail if detail["needs_authorization"] else None

    detail = await eventually(waiting, what="the server to wait for an authorization")
    assert detail["status"] == "ERROR" and "needs authorization:" in detail["error_message"]
    assert detail["next_retry_at"] is None  # nobody reconnects in a loop: it waits for a person
    listed = (await system.api.get(SERVERS)).json()["servers"]
    assert [s["needs_authorization"] for s in listed if s["id"] == server_id] == [True]
    return detail


async def test_shared_oauth_server_is_authorized_once_and_called_as_that_user(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    bodies: list[str] = []
    with captured_logs() as log_output:
        async with running_system(nats_url, database_url) as system:
            created = await system.register(
                "saas", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": {"mode": "oauth", "identity": "shared"}}
            )
            server_id = created["id"]
            bodies.append((await _waits_for_authorization(system, server_id)).__repr__())

            agent = (await system.create_key("robot", "agent"))["token"]
            async with system.client_as(agent) as as_agent:
                refused = await as_agent.post(f"{SERVERS}/{server_id}/authorize")
            assert refused.status_code == 403 and refused.json()["error_code"] == "FORBIDDEN"

            location, answer = await _authorize(system, server_id)
            assert location.startswith(f"{system.api.base_url}/oauth/callback")
            callback = await _callback(system, answer)
            assert callback.status_code == 200, callback.text
            bodies.append(callback.text)
            replayed = await _callback(system, answer)
            assert replayed.status_code == 400 and "already used" in replayed.text
            forged = await system.api.get("/oauth/callback", params={"code": answer["code"][0], "state": "forged"})
            assert forged.status_code == 400

            await system.wait_connected(server_id)  # the authorization connected it, nobody else did
            first = await _call(system, "saas.whoami")
            assert first.status_code == 200, first.text
            assert first.json()["content"][0]["text"] == "alice"
            bodies.append(first.text)

            async with httpx.AsyncClient() as control:
                assert (await control.post(f"{peer.origin}/control/expire")).json()["expired"] >= 1
            second = await _call(system, "saas.echo", {"text": "after expiry"})
            assert second.status_code == 200, second.text  # refreshed on the 401, the caller saw nothing
            assert second.json()["content"][0]["text"] == "after expiry"
            stats = await peer.stats()
            assert stats["code_grants"] == 1 and stats["refresh_grants"] == 1

            detail = await system.server(server_id)
            assert detail["connection_config"]["auth"] == {"mode": "oauth", "identity": "shared"}
            bodies.append(repr(detail))
            rows = await system.backends.db.fetch("SELECT * FROM mcp.upstream_tokens")
            assert len(rows) == 1 and rows[0]["issuer"].rstrip("/") == peer.origin
            stored = repr([dict(row) for row in rows]) + repr(
                await system.backends.db.fetch("SELECT * FROM mcp.external_servers")
            )
            events = await stream_text(system.backends.js)
            removed = await system.api.delete(f"{SERVERS}/{server_id}")
            assert removed.status_code == 204
            assert await system.backends.db.fetchval("SELECT count(*) FROM mcp.upstream_tokens") == 0
    assert "toolmesh.evt.server.authorized" not in events  # the subject is not in the payload...
    assert '"issuer"' in events  # ...but the authorization event is
    logs = log_output.getvalue()
    issued = (await peer.stats())["issued"]
    assert len(issued) == 4  # two access and two refresh tokens
    assert_nowhere(issued, responses="\n".join(bodies), database=stored, events=events, logs=logs)


async def test_an_unknown_state_is_refused_and_no_flow_is_left_to_use(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        created = await system.register(
            "saas-b", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": {"mode": "oauth"}}, auto_connect=False
        )
        _, answer = await _authorize(system, created["id"])
        tampered = {"code": answer["code"][0], "state": answer["state"][0] + "x"}
        assert (await system.api.get("/oauth/callback", params=tampered)).status_code == 400
        wrong_issuer = {k: v[0] for k, v in answer.items()} | {"iss": "https://elsewhere.example"}
        assert (await system.api.get("/oauth/callback", params=wrong_issuer)).status_code == 400
        assert (await peer.stats())["code_grants"] == 0
        assert await system.backends.db.fetchval("SELECT count(*) FROM mcp.upstream_tokens") == 0


async def test_pkce_challenge_is_s256_of_the_verifier(nats_url: str, database_url: str, peer: Peer) -> None:
    """RFC 7636: the challenge in the authorization URL is the S256 of the verifier the token request
    sends; the peer's authorization server (the SDK's) refuses a code asked for with another challenge."""
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        created = await system.register(
            "saas-p", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": {"mode": "oauth"}}, auto_connect=False
        )
        response = await system.api.post(f"{SERVERS}/{created['id']}/authorize")
        url = urlsplit(response.json()["authorization_url"])
        asked = {k: v[0] for k, v in parse_qs(url.query).items()}
        assert asked["code_challenge_method"] == "S256" and 43 <= len(asked["code_challenge"]) <= 128
        other = base64.urlsafe_b64encode(hashlib.sha256(b"another verifier").digest()).decode().rstrip("=")
        _, answer = await follow(urlunsplit(url._replace(query=urlencode(asked | {"code_challenge": other}))))
        assert (await _callback(system, answer)).status_code == 502
        assert (await peer.stats())["code_grants"] == 0

        _, answer = await _authorize(system, created["id"])
        assert (await _callback(system, answer)).status_code == 200
        assert (await peer.stats())["code_grants"] == 1


async def test_a_server_without_oauth_cannot_be_authorized(nats_url: str, database_url: str, peer: Peer) -> None:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        created = await system.register("plain", "HTTP", {"base_url": f"{peer.origin}/mcp"}, auto_connect=False)
        response = await system.api.post(f"{SERVERS}/{created['id']}/authorize")
        assert response.status_code == 422 and response.json()["error_code"] == "VALIDATION_ERROR"


async def test_a_withdrawn_grant_puts_the_server_back_to_needing_authorization(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    fast_health = {"health_interval_seconds": 1.0, "health_check_timeout_seconds": 0.8}
    async with running_system(nats_url, database_url, **fast_health) as system:
        server_id = await _authorized(system, "saas-c", peer)
        async with httpx.AsyncClient() as control:
            await control.post(f"{peer.origin}/control/revoke")
        refused = await _call(system, "saas-c.echo", {"text": "x"})
        assert refused.status_code >= 400
        await _waits_for_authorization(system, server_id)
        stats = await peer.stats()
        assert stats["refresh_grants"] == 0  # the refresh was tried and refused, never granted


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
async def test_a_pre_registered_confidential_client_is_used_and_its_secret_never_shown(
    nats_url: str, database_url: str, method: str
) -> None:
    secret = f"pre-registered-secret-{method}"
    async with running_system(nats_url, database_url, roles=["gateway", "session-worker", "projector"]) as system:
        port = free_port()
        argv = [sys.executable, str(PEER), "--port", str(port), "--user", "bob", "--client-id", "toolmesh-ci"]
        argv += ["--client-secret", secret, "--auth-method", method]
        argv += ["--redirect-uri", f"{system.api.base_url}/oauth/callback"]
        async with running_process(argv, port=port):
            peer = Peer(f"http://127.0.0.1:{port}")
            auth = {"mode": "oauth", "client_id": "toolmesh-ci", "client_secret": secret}
            if method == "client_secret_post":  # the server supports both: say which this client has
                auth["token_endpoint_auth_method"] = method
            created = await system.register("confidential", "HTTP", {"base_url": f"{peer.origin}/mcp", "auth": auth})
            shown = await system.server(created["id"])
            assert shown["connection_config"]["auth"]["client_secret"] == "***"
            _, answer = await _authorize(system, created["id"])
            callback = await _callback(system, answer)
            assert callback.status_code == 200, callback.text
            await system.wait_connected(created["id"])
            called = await _call(system, "confidential.whoami")
            assert called.json()["content"][0]["text"] == "bob"
            stats = await peer.stats()
            assert stats["registrations"] == 0 and stats["code_grants"] == 1  # the configured client, no new one
            detail = await system.server(created["id"])
            stored = repr(await system.backends.db.fetch("SELECT * FROM mcp.upstream_tokens"))
            events = await stream_text(system.backends.js)
    assert_nowhere([secret], response=repr(detail) + repr(created), database=stored, events=events)


async def test_an_sse_server_is_authorized_the_same_way(nats_url: str, database_url: str) -> None:
    port = free_port()
    argv = [sys.executable, str(PEER), "--port", str(port), "--user", "carol", "--transport", "sse"]
    async with running_process(argv, port=port):
        origin = f"http://127.0.0.1:{port}"
        async with running_system(nats_url, database_url, roles=["gateway", "session-worker", "projector"]) as system:
            created = await system.register("legacy", "SSE", {"url": f"{origin}/sse", "auth": {"mode": "oauth"}})
            await _waits_for_authorization(system, created["id"])
            _, answer = await _authorize(system, created["id"])
            callback = await _callback(system, answer)
            assert callback.status_code == 200, callback.text
            await system.wait_connected(created["id"])
            called = await _call(system, "legacy.whoami")
            assert called.status_code == 200, called.text
            assert called.json()["content"][0]["text"] == "carol"


async def test_rotation_reseals_the_grant_and_the_server_stays_authorized_without_the_old_key(
    nats_url: str, database_url: str, peer: Peer
) -> None:
    old, new = CredentialBox("the old credential key"), CredentialBox("the new credential key")
    async with running_system(nats_url, database_url, credential_key="the old credential key") as system:
        server_id = await _authorized(system, "saas-r", peer)
        sealed = await system.backends.db.fetchval("SELECT sealed_grant FROM mcp.upstream_tokens")
        assert old.is_current(sealed)

    rotating = {"credential_key": "the new credential key", "credential_previous_keys": "the old credential key"}
    async with running_system(nats_url, database_url, **rotating) as system:
        report = await system.api.post("/api/v1/aggregator/credentials/reseal")
        assert report.status_code == 200, report.text
        assert report.json() == {
            "resealed": 1,
            "total": 1,
            "grants_resealed": 1,
            "grants_total": 1,
            "key_id": new.key_id,
        }
        again = (await system.api.post("/api/v1/aggregator/credentials/reseal")).json()
        assert again["grants_resealed"] == 0 and again["grants_total"] == 1
        rows = await system.backends.db.fetch("SELECT * FROM mcp.upstream_tokens")
        assert len(rows) == 1 and new.is_current(rows[0]["sealed_grant"])

    async with running_system(nats_url, database_url, credential_key="the new credential key") as system:
        await system.wait_connected(server_id)

        async def called_as_alice() -> bool:  # the old key is gone: the session-worker opened the grant
            called = await _call(system, "saas-r.whoami")
            return called.status_code == 200 and called.json()["content"][0]["text"] == "alice"

        assert await eventually(called_as_alice, timeout=30, what="a call to reach the upstream as alice")
        stored = repr([dict(row) for row in await system.backends.db.fetch("SELECT * FROM mcp.upstream_tokens")])
        events = await stream_text(system.backends.js)
    stats = await peer.stats()
    assert stats["code_grants"] == 1  # nobody authorized it again
    for token in stats["issued"]:
        assert token not in stored and token not in events
