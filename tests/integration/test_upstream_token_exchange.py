"""Token exchange (RFC 8693, issue 25): a per-user server registered with ``auth.token_exchange`` by an
owner; callers presenting a JWT of the front door's identity provider get their upstream token by
exchanging that JWT at the upstream's authorization server (``tests/peers/oauth_server.py
--exchange-jwks``), with no browser: ``authorize`` answers at once, and a call by a JWT caller who
never authorized is exchanged for and then answered as that caller's own user. An API key still gets
the browser flow's URL; an agent may not register such a server; no token rests in plain text.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.harness import System, running_system
from tests.integration.test_jwt_bearer import AUDIENCE, ISSUER, jwks, rsa_key, token
from tests.leaks import assert_nowhere
from tests.oauth_peer import PEER, Peer, stream_text
from tests.peers.launch import free_port, running_process

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
CALL = "/api/v1/tools/call"
CLIENT_ID, CLIENT_SECRET = "toolmesh-exchange", "exchange-client-secret"


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa_key()


@pytest.fixture
def trusted_keys(tmp_path: Path, signing_key: rsa.RSAPrivateKey) -> Path:
    keys = tmp_path / "jwks.json"
    keys.write_text(json.dumps(jwks(signing_key, "k1")))
    return keys


@pytest.fixture
async def exchanging_peer(trusted_keys: Path) -> AsyncIterator[Peer]:
    port = free_port()
    argv = [sys.executable, str(PEER), "--port", str(port), "--client-id", CLIENT_ID]
    argv += ["--client-secret", CLIENT_SECRET, "--redirect-uri", "http://127.0.0.1:1/oauth/callback"]
    argv += ["--exchange-jwks", str(trusted_keys)]
    async with running_process(argv, port=port):
        yield Peer(f"http://127.0.0.1:{port}")


def _config(peer: Peer) -> dict[str, Any]:
    auth = {
        "mode": "oauth",
        "identity": "per_user",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "token_exchange": {"token_endpoint": f"{peer.origin}/exchange"},
    }
    return {"base_url": f"{peer.origin}/mcp", "auth": auth}


def _jwt(key: rsa.RSAPrivateKey, subject: str) -> str:
    return token(key, sub=subject, toolmesh_role="user", toolmesh_namespace="default")


async def _as(system: System, bearer: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return await system.api.request(method, path, headers={"Authorization": f"Bearer {bearer}"}, **kwargs)


async def test_jwt_callers_are_authorized_by_exchanging_their_tokens(
    nats_url: str, database_url: str, trusted_keys: Path, signing_key: rsa.RSAPrivateKey, exchanging_peer: Peer
) -> None:
    front_door = {"jwt_jwks_file": trusted_keys, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}
    async with running_system(nats_url, database_url, **front_door) as system:
        agent = (await system.create_key("robot", "agent"))["token"]
        refused = await _as(
            system,
            agent,
            "POST",
            SERVERS,
            json={"name": "nope", "transport_type": "HTTP", "connection_config": _config(exchanging_peer)},
        )
        assert refused.status_code == 403 and refused.json()["error_code"] == "FORBIDDEN", refused.text

        created = await system.register("xsaas", "HTTP", _config(exchanging_peer))
        alice, bob = _jwt(signing_key, "alice@example.test"), _jwt(signing_key, "bob@example.test")
        started = await _as(system, alice, "POST", f"{SERVERS}/{created['id']}/authorize")
        assert started.status_code == 200, started.text
        assert started.json()["authorized"] is True and started.json()["authorization_url"] is None
        await system.wait_connected(created["id"])  # discovered with alice's exchanged grant
        as_alice = await _as(system, alice, "POST", CALL, json={"name": "xsaas.whoami", "arguments": {}})
        assert as_alice.json()["content"][0]["text"] == "alice@example.test", as_alice.text

        as_bob = await _as(system, bob, "POST", CALL, json={"name": "xsaas.whoami", "arguments": {}})
        assert as_bob.status_code == 200, as_bob.text  # exchanged on the way, unnoticed
        assert as_bob.json()["content"][0]["text"] == "bob@example.test"
        assert (await exchanging_peer.stats())["exchanges"] == 2

        user = (await system.create_key("kim", "user"))["token"]
        browser_flow = await _as(system, user, "POST", CALL, json={"name": "xsaas.whoami", "arguments": {}})
        assert browser_flow.status_code == 403, browser_flow.text
        assert browser_flow.json()["authorization_url"].startswith(f"{exchanging_peer.origin}/authorize?")

        stored = repr(await system.backends.db.fetch("SELECT * FROM mcp.upstream_tokens"))
        events = await stream_text(system.backends.js)
        bodies = as_alice.text + as_bob.text + started.text
    issued = (await exchanging_peer.stats())["issued"]
    assert len([t for t in issued if t.startswith("at-")]) == 2  # one access token per exchange
    assert_nowhere([*issued, alice, bob, CLIENT_SECRET], database=stored, events=events, responses=bodies)


async def test_a_jwt_callers_step_up_exchanges_for_the_wider_scope_once(
    nats_url: str, database_url: str, trusted_keys: Path, signing_key: rsa.RSAPrivateKey, exchanging_peer: Peer
) -> None:
    """``admin_echo`` needs ``admin``: the exchange after the scope challenge asks for it (alice is granted
    it and served in the same call); bob, never granted it, gets EXECUTION_FAILED, not an endless
    UPSTREAM_AUTHORIZATION_REQUIRED whose re-authorization exchanges for the old scope again."""
    front_door = {"jwt_jwks_file": trusted_keys, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}
    async with running_system(nats_url, database_url, **front_door) as system:
        created = await system.register("xsaas", "HTTP", _config(exchanging_peer))
        alice, bob = _jwt(signing_key, "alice@example.test"), _jwt(signing_key, "bob@example.test")
        assert (await _as(system, alice, "POST", f"{SERVERS}/{created['id']}/authorize")).status_code == 200
        await system.wait_connected(created["id"])
        call = {"name": "xsaas.admin_echo", "arguments": {"text": "hi"}}

        stepped = await _as(system, alice, "POST", CALL, json=call)
        assert stepped.status_code == 200, stepped.text
        assert stepped.json()["content"][0]["text"] == "admin: hi"
        assert (await exchanging_peer.stats())["exchange_scopes"][-1] == "mcp admin"

        refused = await _as(system, bob, "POST", CALL, json=call)
        assert refused.status_code == 502, refused.text
        assert refused.json()["error_code"] == "EXECUTION_FAILED" and "would not help" in refused.json()["detail"]
        before = await exchanging_peer.stats()
        again = await _as(system, bob, "POST", CALL, json=call)
        assert again.json()["error_code"] == "EXECUTION_FAILED", again.text
        after = await exchanging_peer.stats()
        assert after["exchanges"] == before["exchanges"]  # nothing asked again
        assert after["scope_challenges"] == before["scope_challenges"] + 1


async def test_a_refused_exchange_says_why_in_the_callers_error(
    nats_url: str,
    database_url: str,
    tmp_path: Path,
    trusted_keys: Path,
    signing_key: rsa.RSAPrivateKey,
    exchanging_peer: Peer,
) -> None:
    """A JWT caller has no URL to open: when the authorization server refuses its exchange (bob's JWT is
    signed by a key the front door trusts and it does not), its error says why, not only "authorize with
    POST .../authorize" (which would be refused the same way)."""
    other = rsa_key()
    both = tmp_path / "front-door-jwks.json"
    both.write_text(json.dumps({"keys": jwks(signing_key, "k1")["keys"] + jwks(other, "k2")["keys"]}))
    front_door = {"jwt_jwks_file": both, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}
    async with running_system(nats_url, database_url, **front_door) as system:
        created = await system.register("xsaas", "HTTP", _config(exchanging_peer))
        alice = _jwt(signing_key, "alice@example.test")
        assert (await _as(system, alice, "POST", f"{SERVERS}/{created['id']}/authorize")).status_code == 200
        await system.wait_connected(created["id"])
        bob = token(other, kid="k2", sub="bob@example.test", toolmesh_role="user", toolmesh_namespace="default")
        refused = await _as(system, bob, "POST", CALL, json={"name": "xsaas.whoami", "arguments": {}})
    assert refused.status_code == 403, refused.text
    body = refused.json()
    assert body["error_code"] == "UPSTREAM_AUTHORIZATION_REQUIRED" and body.get("authorization_url") is None
    assert "Token exchange failed: token endpoint answered HTTP 400" in body["detail"], body["detail"]
    assert bob not in refused.text


async def test_a_jwt_callers_expired_token_is_exchanged_again_on_a_rest_server(
    nats_url: str, database_url: str, trusted_keys: Path, signing_key: rsa.RSAPrivateKey
) -> None:
    """Exchanged tokens come without a refresh token: once the REST server refuses one, the call is
    exchanged for anew and served."""
    port = free_port()
    argv = [sys.executable, str(PEER), "--port", str(port), "--client-id", CLIENT_ID, "--transport", "rest"]
    argv += ["--client-secret", CLIENT_SECRET, "--redirect-uri", "http://127.0.0.1:1/oauth/callback"]
    argv += ["--exchange-jwks", str(trusted_keys)]
    front_door = {"jwt_jwks_file": trusted_keys, "jwt_issuer": ISSUER, "jwt_audience": AUDIENCE}
    quiet = {"health_interval_seconds": 600.0}  # the server's own session finds out nothing meanwhile
    async with (
        running_process(argv, port=port),
        running_system(nats_url, database_url, **front_door, **quiet) as system,
    ):
        peer = Peer(f"http://127.0.0.1:{port}")
        config = {"url": f"{peer.origin}/api", "auth": _config(peer)["auth"]}
        created = await system.register("xrest", "REST", config)
        alice = _jwt(signing_key, "alice@example.test")
        assert (await _as(system, alice, "POST", f"{SERVERS}/{created['id']}/authorize")).status_code == 200
        await system.wait_connected(created["id"])
        call = {"name": "xrest.whoami", "arguments": {}}
        assert (await _as(system, alice, "POST", CALL, json=call)).json()["structuredContent"]["user"] == (
            "alice@example.test"
        )
        await peer.control("expire")
        again = await _as(system, alice, "POST", CALL, json=call)
        assert again.status_code == 200, again.text
        assert again.json()["structuredContent"]["user"] == "alice@example.test"
        assert (await peer.stats())["exchanges"] == 2
