"""Refresh tokens of the gateway's authorization server rotate on each use; a rotated one presented
again (it was stolen) ends the grant; one client cannot use another's. No token, code or client
secret reaches a log line or a row in clear."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest

from tests.harness import System, running_system
from tests.leaks import assert_nowhere, captured_logs
from tests.oauth_client_flow import (
    Client,
    Tokens,
    consented_code,
    mcp_status,
    refresh,
    registered,
    revoke,
    signed_in,
    tokens_of,
)
from toolmesh.credentials import hash_token

pytestmark = pytest.mark.integration


@dataclass
class Gateway:
    system: System
    http: httpx.AsyncClient
    owner: str


@pytest.fixture
async def gateway(nats_url: str, database_url: str) -> AsyncIterator[Gateway]:
    async with running_system(nats_url, database_url, oauth_registrations_per_minute=0) as system:
        async with httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http:
            yield Gateway(system, http, system.settings.admin_token or "")


async def _signed_in(gw: Gateway) -> tuple[Client, Tokens]:
    client = await registered(gw.http)
    return client, await signed_in(gw.http, gw.owner, client=client)


def _invalid_grant(response: httpx.Response) -> None:
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant", response.text


async def test_a_refresh_token_rotates(gateway: Gateway) -> None:
    gw = gateway
    client, first = await _signed_in(gw)
    second = tokens_of(await refresh(gw.http, client.client_id, first.refresh))
    assert second.refresh != first.refresh and second.access != first.access
    assert second.refresh.startswith("tmr_") and second.access.startswith("tmo_")
    assert await mcp_status(gw.http, second.access) == 200
    assert await mcp_status(gw.http, first.access) == 401
    third = tokens_of(await refresh(gw.http, client.client_id, second.refresh))
    assert await mcp_status(gw.http, third.access) == 200


async def test_a_rotated_refresh_token_presented_again_ends_the_grant(gateway: Gateway) -> None:
    gw = gateway
    client, first = await _signed_in(gw)
    second = tokens_of(await refresh(gw.http, client.client_id, first.refresh))
    assert await mcp_status(gw.http, second.access) == 200
    _invalid_grant(await refresh(gw.http, client.client_id, first.refresh))
    assert await mcp_status(gw.http, second.access) == 401
    _invalid_grant(await refresh(gw.http, client.client_id, second.refresh))


async def test_any_earlier_refresh_token_presented_again_ends_the_grant(gateway: Gateway) -> None:
    gw = gateway
    client, first = await _signed_in(gw)
    second = tokens_of(await refresh(gw.http, client.client_id, first.refresh))
    third = tokens_of(await refresh(gw.http, client.client_id, second.refresh))
    _invalid_grant(await refresh(gw.http, client.client_id, first.refresh))
    assert await mcp_status(gw.http, third.access) == 401
    _invalid_grant(await refresh(gw.http, client.client_id, third.refresh))


async def test_a_refresh_token_used_twice_at_once_ends_the_grant(gateway: Gateway) -> None:
    gw = gateway
    client, first = await _signed_in(gw)
    answers = await asyncio.gather(*(refresh(gw.http, client.client_id, first.refresh) for _ in range(2)))
    assert sorted(a.status_code for a in answers) == [200, 400], [a.text for a in answers]
    won = next(tokens_of(a) for a in answers if a.status_code == 200)
    assert await mcp_status(gw.http, won.access) == 401
    _invalid_grant(await refresh(gw.http, client.client_id, won.refresh))


async def test_a_refresh_token_is_bound_to_its_client(gateway: Gateway) -> None:
    gw = gateway
    client, tokens = await _signed_in(gw)
    thief = await registered(gw.http)
    _invalid_grant(await refresh(gw.http, thief.client_id, tokens.refresh))
    assert (await revoke(gw.http, thief.client_id, tokens.access)).status_code == 200
    assert await mcp_status(gw.http, tokens.access) == 200  # another client's revocation does nothing
    assert await mcp_status(gw.http, tokens_of(await refresh(gw.http, client.client_id, tokens.refresh)).access) == 200


@pytest.mark.parametrize("which", ["access", "refresh"])
async def test_revoking_either_token_ends_both(gateway: Gateway, which: str) -> None:
    gw = gateway
    client, tokens = await _signed_in(gw)
    assert (await revoke(gw.http, client.client_id, getattr(tokens, which))).status_code == 200
    assert await mcp_status(gw.http, tokens.access) == 401
    _invalid_grant(await refresh(gw.http, client.client_id, tokens.refresh))
    assert (await gw.system.api.get("/api/v1/auth/apps")).json()["total"] == 0


async def _rows(gw: Gateway) -> str:
    conn = await asyncpg.connect(gw.system.settings.database_url)
    try:
        texts = []
        for table in ("oauth_clients", "oauth_requests", "oauth_codes", "oauth_grants", "oauth_spent_refresh"):
            texts += [str(dict(r)) for r in await conn.fetch(f"SELECT * FROM mcp.{table}")]
        return "\n".join(texts)
    finally:
        await conn.close()


async def test_tokens_codes_and_secrets_are_in_no_log_line_and_stored_only_hashed(gateway: Gateway) -> None:
    gw = gateway
    with captured_logs() as logs:
        confidential = await gw.http.post(
            "/register",
            json={
                "redirect_uris": ["http://127.0.0.1:33418/callback"],
                "token_endpoint_auth_method": "client_secret_post",
                "scope": "mcp offline_access",
            },
        )
        assert confidential.status_code == 201, confidential.text
        secret = confidential.json()["client_secret"]
        client = Client(confidential.json()["client_id"])
        code = await consented_code(gw.http, client, gw.owner)
        body = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": client.redirect_uri,
            "code_verifier": client.verifier,
            "client_id": client.client_id,
            "client_secret": secret,
        }
        first = tokens_of(await gw.http.post("/token", data=body))
        assert await mcp_status(gw.http, first.access) == 200
        assert await mcp_status(gw.http, first.access, "/mcp/nothing") == 401
        second = tokens_of(
            await gw.http.post(
                "/token",
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": first.refresh,
                    "client_id": client.client_id,
                    "client_secret": secret,
                },
            )
        )
        rows = await _rows(gw)
    secrets = [secret, code, first.access, first.refresh, second.access, second.refresh, client.verifier]
    assert_nowhere(secrets, logs=logs.getvalue(), rows=rows)
    assert logs.getvalue(), "no log line was captured"
    assert all(hash_token(t) in rows for t in (second.access, second.refresh, first.refresh, code)), "not stored hashed"
