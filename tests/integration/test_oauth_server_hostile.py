"""The gateway's authorization server against an anonymous caller: what ``/authorize`` keeps for the
consent page is bounded in size, whatever the request carries, and naming Client ID Metadata
Documents at ``/token`` or ``/revoke`` does not make the gateway fetch without limit; each
registration keeps the address it came from. A key limited to MCP endpoints, which may consent,
sees and ends the apps it connected (its own only)."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from tests.harness import running_system
from tests.integration.test_oauth_server_documents import Documents, documents
from tests.oauth_client_flow import challenge_of, mcp_status, registered, signed_in

pytestmark = pytest.mark.integration
__all__ = ["documents"]  # the fixture


async def test_an_oversized_authorization_request_is_refused_and_not_kept(nats_url: str, database_url: str) -> None:
    async with (
        running_system(nats_url, database_url, oauth_registrations_per_minute=0) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        client = await registered(http)
        form = {
            "response_type": "code",
            "client_id": client.client_id,
            "redirect_uri": client.redirect_uri,
            "code_challenge": challenge_of(client.verifier),
            "code_challenge_method": "S256",
            "scope": "mcp",
        }
        for big in ({"state": "s" * 512 * 1024}, {"code_challenge": "c" * 512 * 1024}):
            answer = await http.post("/authorize", data={**form, **big}, follow_redirects=False)
            assert answer.status_code == 400, (answer.status_code, answer.headers.get("location", "")[:200])
            assert answer.json()["error"] == "invalid_request" and len(answer.content) < 1024, answer.text[:300]
        conn = await asyncpg.connect(system.settings.database_url)
        try:
            kept = await conn.fetchval("SELECT coalesce(sum(length(params::text)), 0) FROM mcp.oauth_requests")
        finally:
            await conn.close()
        assert kept == 0, kept


async def test_documents_named_at_token_and_revoke_are_fetched_within_the_authorization_limit(
    nats_url: str, database_url: str, documents: Documents
) -> None:
    async with (
        running_system(
            nats_url,
            database_url,
            egress_ca_file=documents.ca_file,
            upstream_private_networks=("127.0.0.0/8",),
            oauth_authorizations_per_minute=1,
        ) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        answers = []
        for i in range(30):
            form = {"client_id": documents.url(f"made-up-{i}")}
            if i % 2:
                answers.append(await http.post("/revoke", data={**form, "token": "tmr_x"}))
            else:
                answers.append(
                    await http.post("/token", data={**form, "grant_type": "refresh_token", "refresh_token": "x"})
                )
        assert len(documents.seen) <= 20, len(documents.seen)  # the burst of /authorize's limit
        assert {a.status_code for a in answers[20:]} == {429}, [a.text for a in answers[20:]]
        assert answers[-1].json()["error"] == "slow_down"


async def test_a_registration_keeps_the_address_it_came_from(nats_url: str, database_url: str) -> None:
    async with (
        running_system(nats_url, database_url, oauth_registrations_per_minute=0) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        client = await registered(http)
        conn = await asyncpg.connect(system.settings.database_url)
        try:
            source = await conn.fetchval(
                "SELECT registered_from FROM mcp.oauth_clients WHERE client_id = $1", client.client_id
            )
        finally:
            await conn.close()
        assert source == "127.0.0.1", source


async def test_an_endpoint_limited_key_sees_and_ends_only_the_apps_it_connected(
    nats_url: str, database_url: str
) -> None:
    async with (
        running_system(nats_url, database_url, oauth_registrations_per_minute=0) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        base = str(system.api.base_url).rstrip("/")
        endpoint = {"name": "dev", "include": ["alpha.*"]}
        assert (await system.api.post("/api/v1/endpoints", json=endpoint)).status_code == 201
        limited = (await system.create_key("dev-admin", "admin", endpoints=["dev"]))["token"]
        owner = system.settings.admin_token or ""
        mine = await signed_in(http, limited, f"{base}/mcp/dev")
        await signed_in(http, owner, f"{base}/mcp")
        auth = {"Authorization": f"Bearer {limited}"}
        as_token = await http.get("/api/v1/auth/apps", headers={"Authorization": f"Bearer {mine.access}"})
        assert as_token.status_code == 403, as_token.text
        listed = await http.get("/api/v1/auth/apps", headers=auth)
        assert listed.status_code == 200, listed.text
        apps = listed.json()["apps"]
        assert [a["resource"] for a in apps] == [f"{base}/mcp/dev"], apps
        everyone = (await system.api.get("/api/v1/auth/apps")).json()["apps"]
        other = next(a["id"] for a in everyone if a["id"] != apps[0]["id"])
        assert (await http.delete(f"/api/v1/auth/apps/{other}", headers=auth)).status_code == 404
        assert (await http.delete(f"/api/v1/auth/apps/{apps[0]['id']}", headers=auth)).status_code == 204
        assert await mcp_status(http, mine.access, "/mcp/dev") == 401
