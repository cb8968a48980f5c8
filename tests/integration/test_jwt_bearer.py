"""JWT bearer tokens of an identity provider: verified against a JWKS (file or URL), issuer,
audience and expiry; role and namespace from the configured claims; never an owner."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.harness import System, running_system

pytestmark = pytest.mark.integration
ISSUER, AUDIENCE = "https://idp.example.test", "toolmesh"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwks(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {"keys": [{**public, "kid": kid, "use": "sig", "alg": "RS256"}]}


def token(key: rsa.RSAPrivateKey, kid: str = "k1", **claims: Any) -> str:
    body = {
        "sub": "alice@example.test",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "exp": int(time.time()) + 300,
        "toolmesh_role": "admin",
        "toolmesh_namespace": "team-j",
        **claims,
    }
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa_key()


@pytest.fixture
async def system(
    nats_url: str, database_url: str, tmp_path: Path, signing_key: rsa.RSAPrivateKey
) -> AsyncIterator[System]:
    keys = tmp_path / "jwks.json"
    keys.write_text(json.dumps(jwks(signing_key, "k1")))
    async with running_system(
        nats_url, database_url, jwt_jwks_file=keys, jwt_issuer=ISSUER, jwt_audience=AUDIENCE
    ) as system:
        yield system


async def as_bearer(system: System, bearer: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return await system.api.request(method, path, headers={"Authorization": f"Bearer {bearer}"}, **kwargs)


async def test_a_valid_token_acts_in_its_claimed_namespace_and_role(
    system: System, signing_key: rsa.RSAPrivateKey
) -> None:
    admin = token(signing_key)
    body = {
        "name": "idp-server",
        "transport_type": "STDIO",
        "connection_config": {"command": "true"},
        "auto_connect": False,
    }
    created = await as_bearer(system, admin, "POST", "/api/v1/aggregator/servers", json=body)
    assert created.status_code == 201 and created.json()["namespace"] == "team-j"
    listed = (await as_bearer(system, admin, "GET", "/api/v1/aggregator/servers")).json()
    assert [s["name"] for s in listed["servers"]] == ["idp-server"]
    user = token(signing_key, toolmesh_role="user", sub="bob@example.test")
    denied = await as_bearer(system, user, "DELETE", f"/api/v1/aggregator/servers/{created.json()['id']}")
    assert denied.status_code == 403
    elsewhere = token(signing_key, toolmesh_namespace="team-k")
    hidden = await as_bearer(system, elsewhere, "GET", f"/api/v1/aggregator/servers/{created.json()['id']}")
    assert hidden.status_code == 404


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": int(time.time()) - 60},
        {"aud": "someone-else"},
        {"iss": "https://evil.example.test"},
        {"toolmesh_role": "owner"},
        {"toolmesh_namespace": "Not A Namespace"},
    ],
    ids=["expired", "audience", "issuer", "owner-claim", "bad-namespace"],
)
async def test_tokens_that_fail_verification_are_refused(
    system: System, signing_key: rsa.RSAPrivateKey, claims: dict[str, Any]
) -> None:
    response = await as_bearer(system, token(signing_key, **claims), "GET", "/api/v1/aggregator/servers")
    assert response.status_code == 401 and response.json()["error_code"] == "UNAUTHORIZED"


async def test_a_token_signed_by_another_key_is_refused(system: System) -> None:
    forged = token(rsa_key())
    response = await as_bearer(system, forged, "GET", "/api/v1/aggregator/servers")
    assert response.status_code == 401


@pytest.fixture
def jwks_url(signing_key: rsa.RSAPrivateKey) -> Iterator[str]:
    document = json.dumps(jwks(signing_key, "k1")).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    finally:
        server.shutdown()
        thread.join(5)


async def test_keys_are_fetched_from_a_jwks_url(
    nats_url: str, database_url: str, jwks_url: str, signing_key: rsa.RSAPrivateKey
) -> None:
    async with running_system(
        nats_url, database_url, jwt_jwks_url=jwks_url, jwt_issuer=ISSUER, jwt_audience=AUDIENCE
    ) as system:
        response = await as_bearer(system, token(signing_key), "GET", "/api/v1/aggregator/servers")
        assert response.status_code == 200
        api_key = await as_bearer(system, "not-a-jwt-and-not-a-key", "GET", "/api/v1/aggregator/servers")
        assert api_key.status_code == 401
        assert (await system.api.get("/api/v1/aggregator/servers")).status_code == 200  # API keys still work
