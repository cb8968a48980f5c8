"""Registration and consent requests of the gateway's authorization server under abuse: registrations
limited per address and in size, consent requests that expire and are decided once, by an API key
only, with nothing but their random id reaching the console page."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from tests.harness import System, running_system
from tests.integration.test_jwt_bearer import AUDIENCE, ISSUER, jwks, rsa_key, token
from tests.oauth_client_flow import (
    CONSENT_MARK,
    authorize,
    decide,
    exchange,
    mcp_status,
    query_of,
    register,
    registered,
    request_id_of,
    tokens_of,
)

pytestmark = pytest.mark.integration


async def _clients(system: System) -> int:
    conn = await asyncpg.connect(system.settings.database_url)
    try:
        count: int = await conn.fetchval("SELECT count(*) FROM mcp.oauth_clients")
        return count
    finally:
        await conn.close()


async def test_registration_is_limited_per_address(nats_url: str, database_url: str) -> None:
    async with (
        running_system(nats_url, database_url, oauth_registrations_per_minute=1) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        answers = [await register(http) for _ in range(8)]
        assert [a.status_code for a in answers[:5]] == [201] * 5, [a.text for a in answers]
        refused = answers[5:]
        assert {a.status_code for a in refused} == {429}, [a.text for a in refused]
        assert refused[0].json()["error"] == "slow_down" and "retry-after" in refused[0].headers
        assert await _clients(system) == 5


async def test_oversized_registrations_are_refused(nats_url: str, database_url: str) -> None:
    async with (
        running_system(nats_url, database_url, oauth_registrations_per_minute=0) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        many = [f"http://127.0.0.1/cb/{i}" for i in range(3000)]
        for body in (
            {"redirect_uris": many, "token_endpoint_auth_method": "none"},
            {"redirect_uris": ["http://127.0.0.1/cb"], "client_name": "x" * 64 * 1024},
        ):
            response = await http.post("/register", json=body)
            assert response.status_code == 413, response.text[:300]
        huge = await http.post("/register", content=b"{" + b" " * (system.settings.max_request_body_bytes + 1) + b"}")
        assert huge.status_code == 413
        assert await _clients(system) == 0


async def test_a_consent_request_expires_and_is_decided_once(nats_url: str, database_url: str) -> None:
    async with (
        running_system(nats_url, database_url, oauth_consent_seconds=30) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        owner = system.settings.admin_token or ""
        client = await registered(http)
        request_id = request_id_of(await authorize(http, client))
        shown = await system.api.get(f"/api/v1/oauth/requests/{request_id}")
        assert shown.status_code == 200, shown.text
        conn = await asyncpg.connect(system.settings.database_url)
        try:
            left = await conn.fetchval(
                "SELECT extract(epoch FROM expires_at - now()) FROM mcp.oauth_requests WHERE request_id = $1",
                request_id,
            )
            assert 25 < left <= 30
            await conn.execute("UPDATE mcp.oauth_requests SET expires_at = now() - interval '1 second'")
        finally:
            await conn.close()
        for answer in (
            await system.api.get(f"/api/v1/oauth/requests/{request_id}"),
            await decide(http, request_id, owner),
        ):
            assert answer.status_code == 404 and answer.json()["error_code"] == "AUTHORIZATION_REQUEST_NOT_FOUND"

        fresh = request_id_of(await authorize(http, client))
        denied = await decide(http, fresh, owner, allow=False)
        assert denied.status_code == 200 and query_of(denied.json()["redirect_to"])["error"] == "access_denied"
        assert (await decide(http, fresh, owner)).status_code == 404


async def test_only_the_random_request_id_reaches_the_consent_page(nats_url: str, database_url: str) -> None:
    async with (
        running_system(nats_url, database_url) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        client = await registered(http)
        first, second = (await authorize(http, client, state="secret-state"), await authorize(http, client))
        location = first.headers["location"]
        assert location.startswith(f"{str(system.api.base_url).rstrip('/')}{CONSENT_MARK}")
        request_id = request_id_of(first)
        assert request_id != request_id_of(second) and len(request_id) >= 40
        assert not urlsplit(location).query
        for leaked in (client.client_id, "secret-state", "callback", "code_challenge", "127.0.0.1:33418"):
            assert leaked not in request_id
        described = (await system.api.get(f"/api/v1/oauth/requests/{request_id}")).json()
        assert described["client_id"] == client.client_id and "code_challenge" not in json.dumps(described)
        anonymous = await http.get(f"/api/v1/oauth/requests/{request_id}")
        assert anonymous.status_code == 401


async def test_a_jwt_principal_consents_as_the_identity_its_token_names(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    """A person of the identity provider has no key: the grant keeps who their JWT named (role and
    namespace of its claims), and the token acts as them."""
    key = rsa_key()
    keys = tmp_path / "jwks.json"
    keys.write_text(json.dumps(jwks(key, "k1")))
    async with (
        running_system(nats_url, database_url, jwt_jwks_file=keys, jwt_issuer=ISSUER, jwt_audience=AUDIENCE) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        client = await registered(http)
        request_id = request_id_of(await authorize(http, client))
        allowed = await decide(http, request_id, token(key, toolmesh_role="user"))
        assert allowed.status_code == 200, allowed.text
        tokens = tokens_of(await exchange(http, client, query_of(allowed.json()["redirect_to"])["code"]))
        assert await mcp_status(http, tokens.access) == 200
        (app,) = (await system.api.get("/api/v1/auth/apps")).json()["apps"]
        assert (app["key_id"], app["role"], app["namespace"]) == ("jwt:alice@example.test", "user", "team-j")
        mine = await http.get("/api/v1/auth/apps", headers={"Authorization": f"Bearer {token(key)}"})
        assert [a["id"] for a in mine.json()["apps"]] == [app["id"]]
