"""Failed authentications are rate limited per client address, on REST, ``/mcp`` and the console's
API use, without locking other addresses out: an attacker guessing tokens from one address gets
429 with ``Retry-After`` after a few failures, even when it then sends a right token (no answer
tells it a guess was right), while the owner working from another address is not affected.

Clients connect from distinct loopback addresses (127.0.0.2, 127.0.0.3, ...), as distinct hosts
would reach the gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, System, running_system
from tests.mcp_client import mcp_url
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT

pytestmark = pytest.mark.integration
LIMIT = 3


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(
        nats_url, database_url, roles=["gateway", "projector"], auth_failure_limit=LIMIT
    ) as system:
        yield system


def from_address(system: System, address: str) -> httpx.AsyncClient:
    """A client whose connections come from ``address``."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=str(system.api.base_url), transport=transport, timeout=30)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_guessing_tokens_over_rest_locks_out_that_address_only(system: System) -> None:
    async with from_address(system, "127.0.0.2") as attacker, from_address(system, "127.0.0.3") as owner:
        for guess in range(LIMIT):
            refused = await attacker.get("/api/v1/auth/me", headers=bearer(f"guess-{guess}"))
            assert refused.status_code == 401, refused.text
        limited = await attacker.get("/api/v1/auth/me", headers=bearer("guess-next"))
        assert limited.status_code == 429 and limited.json()["error_code"] == "RATE_LIMITED"
        assert int(limited.headers["retry-after"]) >= 1
        right = await attacker.get("/api/v1/auth/me", headers=bearer(ADMIN_TOKEN))
        assert right.status_code == 429  # a right guess is not revealed while the address is limited
        mcp = await attacker.post(mcp_url(system), json=INITIALIZE, headers={**MCP_ACCEPT, **bearer(ADMIN_TOKEN)})
        assert mcp.status_code == 429 and int(mcp.headers["retry-after"]) >= 1
        assert mcp.json()["error_code"] == "RATE_LIMITED"

        me = await owner.get("/api/v1/auth/me", headers=bearer(ADMIN_TOKEN))  # the console's first call
        assert me.status_code == 200 and me.json()["role"] == "owner"
        servers = await owner.get("/api/v1/aggregator/servers", headers=bearer(ADMIN_TOKEN))
        assert servers.status_code == 200
        opened = await owner.post(mcp_url(system), json=INITIALIZE, headers={**MCP_ACCEPT, **bearer(ADMIN_TOKEN)})
        assert opened.status_code == 200, opened.text


async def test_guessing_tokens_over_mcp_counts_for_rest_too(system: System) -> None:
    async with from_address(system, "127.0.0.4") as attacker:
        for guess in range(LIMIT):
            refused = await attacker.post(
                mcp_url(system), json=INITIALIZE, headers={**MCP_ACCEPT, **bearer(f"guess-{guess}")}
            )
            assert refused.status_code == 401, refused.text
        limited = await attacker.get("/api/v1/aggregator/servers", headers=bearer(ADMIN_TOKEN))
        assert limited.status_code == 429 and limited.json()["error_code"] == "RATE_LIMITED"


async def test_requests_without_credentials_and_successes_do_not_count(system: System) -> None:
    async with from_address(system, "127.0.0.5") as client:
        for _ in range(LIMIT * 2):
            assert (await client.get("/api/v1/aggregator/servers")).status_code == 401  # no token: no guess
            assert (await client.get("/api/v1/auth/me", headers=bearer(ADMIN_TOKEN))).status_code == 200
        for guess in range(LIMIT):
            assert (await client.get("/api/v1/auth/me", headers=bearer(f"guess-{guess}"))).status_code == 401
        assert (await client.get("/api/v1/auth/me", headers=bearer(ADMIN_TOKEN))).status_code == 429


async def test_a_forwarded_address_does_not_dodge_the_limit(system: System) -> None:
    """No proxy is trusted by default: a local process naming a new X-Forwarded-For address on every
    guess is still counted by the address it connects from."""
    async with from_address(system, "127.0.0.1") as attacker:
        for guess in range(LIMIT):
            spoofed = {**bearer(f"guess-{guess}"), "X-Forwarded-For": f"198.51.100.{guess}"}
            assert (await attacker.get("/api/v1/auth/me", headers=spoofed)).status_code == 401
        limited = await attacker.get("/api/v1/auth/me", headers={**bearer("x"), "X-Forwarded-For": "198.51.100.9"})
        assert limited.status_code == 429 and limited.json()["error_code"] == "RATE_LIMITED"
