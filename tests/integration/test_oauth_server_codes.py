"""Authorization codes of the gateway's authorization server: single-use (a replay ends what the first
use gave), bound to the PKCE verifier, the redirect URI and the client, short-lived; and redirect
URIs that cannot be turned into an open redirect."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest

from tests.harness import System, running_system
from tests.oauth_client_flow import (
    Client,
    authorize,
    consented_code,
    exchange,
    mcp_status,
    refresh,
    register,
    registered,
    request_id_of,
    tokens_of,
)

pytestmark = pytest.mark.integration


@dataclass
class Gateway:
    system: System
    http: httpx.AsyncClient
    owner: str

    async def sql(self, query: str) -> None:
        conn = await asyncpg.connect(self.system.settings.database_url)
        try:
            await conn.execute(query)
        finally:
            await conn.close()


@pytest.fixture
async def gateway(nats_url: str, database_url: str) -> AsyncIterator[Gateway]:
    async with running_system(nats_url, database_url, oauth_registrations_per_minute=0) as system:
        async with httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http:
            yield Gateway(system, http, system.settings.admin_token or "")


def _error(response: httpx.Response, error: str) -> None:
    assert response.status_code == 400 and response.json()["error"] == error, response.text


async def test_a_code_is_single_use_and_a_replay_ends_what_the_first_use_gave(gateway: Gateway) -> None:
    gw = gateway
    client = await registered(gw.http)
    code = await consented_code(gw.http, client, gw.owner)
    first = tokens_of(await exchange(gw.http, client, code))
    assert await mcp_status(gw.http, first.access) == 200
    _error(await exchange(gw.http, client, code), "invalid_grant")
    assert await mcp_status(gw.http, first.access) == 401
    _error(await refresh(gw.http, client.client_id, first.refresh), "invalid_grant")
    assert (await gw.system.api.get("/api/v1/auth/apps")).json()["total"] == 0


async def test_a_code_exchanged_twice_at_once_gives_no_lasting_tokens(gateway: Gateway) -> None:
    gw = gateway
    client = await registered(gw.http)
    code = await consented_code(gw.http, client, gw.owner)
    answers = await asyncio.gather(*(exchange(gw.http, client, code) for _ in range(2)))
    assert sorted(a.status_code for a in answers) == [200, 400], [a.text for a in answers]
    won = next(tokens_of(a) for a in answers if a.status_code == 200)
    assert await mcp_status(gw.http, won.access) == 401
    assert (await gw.system.api.get("/api/v1/auth/apps")).json()["total"] == 0


async def test_a_code_is_bound_to_the_verifier_the_redirect_uri_and_the_client(gateway: Gateway) -> None:
    gw = gateway
    client = await registered(gw.http, ["http://127.0.0.1:33418/callback", "http://127.0.0.1/other"])
    other = await registered(gw.http)
    code = await consented_code(gw.http, client, gw.owner)
    _error(await exchange(gw.http, client, code, verifier="x" * 64), "invalid_grant")
    _error(await exchange(gw.http, client, code, redirect_uri="http://127.0.0.1/other"), "invalid_request")
    _error(await exchange(gw.http, client, code, redirect_uri="http://127.0.0.1:9/callback"), "invalid_request")
    _error(
        await exchange(gw.http, other, code, verifier=client.verifier, redirect_uri=client.redirect_uri),
        "invalid_grant",
    )
    stolen = await exchange(gw.http, client, code, client_id=other.client_id)
    assert stolen.status_code == 400, stolen.text
    tokens_of(await exchange(gw.http, client, code))  # none of these used the code up


async def test_a_code_expires_within_a_minute(gateway: Gateway) -> None:
    gw = gateway
    client = await registered(gw.http)
    code = await consented_code(gw.http, client, gw.owner)
    conn = await asyncpg.connect(gw.system.settings.database_url)
    try:
        left = await conn.fetchval("SELECT max(extract(epoch FROM expires_at - now())) FROM mcp.oauth_codes")
    finally:
        await conn.close()
    assert 0 < left <= 60
    await gw.sql("UPDATE mcp.oauth_codes SET expires_at = now() - interval '1 second'")
    _error(await exchange(gw.http, client, code), "invalid_grant")


async def test_an_unregistered_redirect_uri_gets_an_error_page_not_a_redirect(gateway: Gateway) -> None:
    gw = gateway
    client = await registered(gw.http)
    for uri in (
        "https://evil.example/callback",
        "http://127.0.0.1:33418/elsewhere",
        "http://127.0.0.2:33418/callback",
        "http://localhost:33418/callback",
        "https://127.0.0.1:33418/callback",
        "http://127.0.0.1:33418/callback?x=1",
        "http://127.0.0.1:33418/callback/../x",
    ):
        response = await authorize(gw.http, client, redirect_uri=uri)
        assert response.status_code == 400 and "location" not in response.headers, (uri, response.text)


async def test_a_loopback_redirect_uri_may_come_back_on_another_port(gateway: Gateway) -> None:
    gw = gateway
    client = await registered(gw.http)
    for uri in ("http://127.0.0.1:51000/callback", "http://127.0.0.1/callback"):
        moved = Client(client.client_id, uri, client.verifier)
        request_id_of(await authorize(gw.http, moved))
    six = await registered(gw.http, ["http://[::1]:4000/cb"])
    request_id_of(await authorize(gw.http, Client(six.client_id, "http://[::1]:5000/cb")))


@pytest.mark.parametrize(
    ("redirect_uris", "fields"),
    [
        (["http://evil.example/callback"], {}),
        (["http://10.0.0.1/callback"], {}),
        (["javascript:alert(document.cookie)"], {}),
        (["JavaScript://127.0.0.1/%0aalert(1)"], {}),
        (["data:text/html,<script>alert(1)</script>"], {}),
        (["vbscript:msgbox(1)"], {}),
        (["file:///etc/passwd"], {}),
        (["https://app.example/callback#fragment"], {}),
        (["http://127.0.0.1:33418/callback#x"], {}),
        (["https://app.example/callback", "http://evil.example/cb"], {}),
        (["http://127.0.0.1:33418/callback"], {"application_type": "web"}),
        (["com.example.app:/callback"], {"application_type": "web"}),
        ([], {}),
    ],
)
async def test_registration_refuses_redirect_uris_that_could_leak_codes(
    gateway: Gateway, redirect_uris: list[str], fields: dict[str, str]
) -> None:
    gw = gateway
    response = await gw.http.post(
        "/register",
        json={"redirect_uris": redirect_uris, "token_endpoint_auth_method": "none", **fields},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"] in ("invalid_redirect_uri", "invalid_client_metadata"), response.text


async def test_registration_accepts_https_loopback_and_app_schemes(gateway: Gateway) -> None:
    gw = gateway
    for uris, fields in (
        (["https://app.example/callback"], {"application_type": "web"}),
        (["http://127.0.0.1:33418/callback", "http://[::1]/cb"], {}),
        (["com.example.app:/callback"], {"application_type": "native"}),
    ):
        response = await register(gw.http, uris, **fields)
        assert response.status_code == 201, (uris, response.text)


async def test_authorize_requires_a_s256_pkce_challenge(gateway: Gateway) -> None:
    gw = gateway
    client = await registered(gw.http)
    base = {"response_type": "code", "client_id": client.client_id, "redirect_uri": client.redirect_uri, "state": "s"}
    for extra in ({}, {"code_challenge": client.verifier, "code_challenge_method": "plain"}):
        response = await gw.http.get("/authorize", params={**base, **extra})
        assert response.status_code == 302, response.text
        location = response.headers["location"]
        assert location.startswith(client.redirect_uri) and "error=invalid_request" in location, location
