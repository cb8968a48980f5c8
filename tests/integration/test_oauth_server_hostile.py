"""The gateway's authorization server against an anonymous caller: what ``/authorize`` keeps for the
consent page is bounded in size, whatever the request carries."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from tests.harness import running_system
from tests.oauth_client_flow import challenge_of, registered

pytestmark = pytest.mark.integration


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
