"""Upstream OAuth against hostile parties (``tests/peers/hostile_oauth.py``): an upstream whose
protected-resource metadata never ends for a reader without a bound; an authorization server whose
token answer has an absurd lifetime or is HTML, or whose authorization endpoint is ``javascript:``;
and anyone on the network at ``/oauth/callback`` (reflected markup, a guessed state)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from tests.harness import System, eventually, running_system
from tests.peers.launch import free_port, running_process
from toolmesh.oauth_tokens import MAX_TOKEN_CHARS
from toolmesh.redaction import process_redactor

pytestmark = pytest.mark.integration
PEERS = Path(__file__).parents[1] / "peers"
PADDING = 64 << 20
"""Whitespace before the metadata: far more than any OAuth document needs."""


@pytest.fixture
async def issuer() -> AsyncIterator[str]:
    port = free_port()
    async with running_process([sys.executable, str(PEERS / "oauth_server.py"), "--port", str(port)], port=port):
        yield f"http://127.0.0.1:{port}"


async def test_metadata_without_end_is_refused_not_read_whole(nats_url: str, database_url: str, issuer: str) -> None:
    port = free_port()
    argv = [sys.executable, str(PEERS / "hostile_oauth.py"), "--port", str(port), "--issuer", issuer]
    async with (
        running_process([*argv, "--padding", str(PADDING)], port=port),
        running_system(nats_url, database_url) as system,
    ):
        base = f"http://127.0.0.1:{port}/mcp"
        created = await system.register("hostile", "HTTP", {"base_url": base, "auth": {"mode": "oauth"}})
        answer = await system.api.post(f"/api/v1/aggregator/servers/{created['id']}/authorize")
        assert answer.status_code == 503, answer.text
        assert "protected-resource metadata" in answer.json()["detail"]


async def test_callback_reflects_no_markup_and_a_guessed_state_gets_nothing(nats_url: str, database_url: str) -> None:
    script = "<script>alert(1)</script>"
    refused = {"error": script, "error_description": script, "state": script}
    async with running_system(nats_url, database_url) as system:
        pages = [
            await system.api.get("/oauth/callback", params=refused),
            await system.api.get("/oauth/callback", params={"code": script, "state": script, "iss": script}),
            await system.api.get("/oauth/callback", params={"code": "c", "state": "A" * 43}),
        ]
    for page in pages:
        assert page.status_code == 400 and "<script>" not in page.text
        assert page.headers["cache-control"] == "no-store" and page.headers["content-type"].startswith("text/html")


@asynccontextmanager
async def hostile(*options: str) -> AsyncIterator[str]:
    """The hostile upstream and authorization server, with ``options``; its ``/mcp`` URL."""
    port = free_port()
    async with running_process(
        [sys.executable, str(PEERS / "hostile_oauth.py"), "--port", str(port), *options], port=port
    ):
        yield f"http://127.0.0.1:{port}/mcp"


async def _redirected(system: System, server_id: str) -> dict[str, str]:
    """Authorize ``server_id`` as the owner; what the authorization server's redirect brings the callback."""
    started = await system.api.post(f"/api/v1/aggregator/servers/{server_id}/authorize")
    assert started.status_code == 200, started.text
    async with httpx.AsyncClient() as browser:
        location = (await browser.get(started.json()["authorization_url"])).headers["location"]
    return dict(parse_qsl(urlsplit(location).query))


async def _callback(system: System, base: str) -> httpx.Response:
    """Register ``base``, authorize it and follow the authorization server's redirect to the callback."""
    created = await system.register("hostile", "HTTP", {"base_url": base, "auth": {"mode": "oauth"}})
    return await system.api.get("/oauth/callback", params=await _redirected(system, created["id"]))


@pytest.mark.parametrize("expires_in", ["1e300", "NaN", "-Infinity", "1" + "0" * 400])
async def test_token_answer_with_an_absurd_lifetime_is_a_grant_without_expiry(
    nats_url: str, database_url: str, expires_in: str
) -> None:
    answer = f'{{"access_token": "hostile-access", "token_type": "Bearer", "expires_in": {expires_in}}}'
    async with hostile("--token-answer", answer) as base, running_system(nats_url, database_url) as system:
        page = await _callback(system, base)
        assert page.status_code == 200 and "authorized" in page.text, page.text
        stored = await system.backends.db.fetchval("SELECT expires_at FROM mcp.upstream_tokens")
        assert stored is None


async def test_token_answer_in_html_and_javascript_endpoint_are_refused(nats_url: str, database_url: str) -> None:
    markup = "<html><script>alert(1)</script></html>"
    async with running_system(nats_url, database_url) as system:
        async with hostile("--token-answer", markup) as base:
            page = await _callback(system, base)
            assert page.status_code == 502 and "other than JSON" in page.text and "<script>" not in page.text
        async with hostile("--authorization-endpoint", "javascript:alert(1)//") as base:
            created = await system.register("scripted", "HTTP", {"base_url": base, "auth": {"mode": "oauth"}})
            started = await system.api.post(f"/api/v1/aggregator/servers/{created['id']}/authorize")
            assert started.status_code == 503 and "javascript" not in started.text


async def test_discovery_named_at_a_metadata_address_is_refused(nats_url: str, database_url: str) -> None:
    named = "http://169.254.169.254/latest/meta-data/iam"
    async with hostile("--resource-metadata", named) as base, running_system(nats_url, database_url) as system:
        created = await system.register("hostile", "HTTP", {"base_url": base, "auth": {"mode": "oauth"}})
        started = await system.api.post(f"/api/v1/aggregator/servers/{created['id']}/authorize")
        assert started.status_code == 503 and "egress policy" in started.json()["detail"], started.text


async def test_a_callback_for_a_removed_server_and_concurrent_callbacks_store_one_grant(
    nats_url: str, database_url: str
) -> None:
    async with hostile() as base, running_system(nats_url, database_url) as system:
        removed = await system.register("removed", "HTTP", {"base_url": base, "auth": {"mode": "oauth"}})
        answer = await _redirected(system, removed["id"])
        deleted = await system.api.delete(f"/api/v1/aggregator/servers/{removed['id']}")
        assert deleted.status_code == 204, deleted.text

        async def gone() -> bool:
            return (await system.api.get(f"/api/v1/aggregator/servers/{removed['id']}")).status_code == 404

        await eventually(gone, what="the server to be removed")
        page = await system.api.get("/oauth/callback", params=answer)
        assert page.status_code == 400 and "not found" in page.text.lower(), page.text

        created = await system.register("hostile", "HTTP", {"base_url": base, "auth": {"mode": "oauth"}})
        answer = await _redirected(system, created["id"])
        pages = await asyncio.gather(*(system.api.get("/oauth/callback", params=answer) for _ in range(8)))
        assert sorted(page.status_code for page in pages) == [200] + [400] * 7
        rows = await system.backends.db.fetch("SELECT server_id FROM mcp.upstream_tokens")
        assert [row["server_id"] for row in rows] == [created["id"]]


async def test_a_server_removed_while_its_code_is_exchanged_keeps_no_grant(nats_url: str, database_url: str) -> None:
    async with hostile("--token-hold") as base, running_system(nats_url, database_url) as system:
        origin = base.removesuffix("/mcp")
        created = await system.register("going", "HTTP", {"base_url": base, "auth": {"mode": "oauth"}})
        answer = await _redirected(system, created["id"])
        callback = asyncio.create_task(system.api.get("/oauth/callback", params=answer))
        async with httpx.AsyncClient(base_url=origin) as control:

            async def exchanging() -> bool:
                return bool((await control.get("/control/asked")).json()["asked"])

            await eventually(exchanging, what="the code to be at the token endpoint")
            assert (await system.api.delete(f"/api/v1/aggregator/servers/{created['id']}")).status_code == 204

            async def gone() -> bool:
                return (await system.api.get(f"/api/v1/aggregator/servers/{created['id']}")).status_code == 404

            await eventually(gone, what="the removal to be projected")
            await control.post("/control/release")
        page = await callback
        assert page.status_code == 400 and "not found" in page.text.lower(), page.text
        assert await system.backends.db.fetchval("SELECT count(*) FROM mcp.upstream_tokens") == 0


async def test_registered_client_secrets_do_not_grow_the_log_redactor(nats_url: str, database_url: str) -> None:
    """An authorization server that registers a new client with a new (large) secret for every
    authorization (its upstream names another scope each time): a key authorizing in a loop does not
    make the gateway's redactor, and the cost of every log line, grow without end."""
    redactor = process_redactor()
    saved, redactor.retired_limit = redactor.retired_limit, 16
    try:
        async with (
            hostile("--client-secret-bytes", "4096") as base,
            running_system(nats_url, database_url, roles=["gateway", "projector"]) as system,
        ):
            per_user = {"mode": "oauth", "identity": "per_user"}
            created = await system.register("hostile", "HTTP", {"base_url": base, "auth": per_user}, auto_connect=False)
            callback = await system.api.get("/oauth/callback", params=await _redirected(system, created["id"]))
            assert callback.status_code == 200, callback.text
            before = len(redactor)
            for _ in range(20):
                callback = await system.api.get("/oauth/callback", params=await _redirected(system, created["id"]))
                assert callback.status_code == 200, callback.text
            assert len(redactor) - before <= 16
    finally:
        redactor.retired_limit = saved


async def test_a_registered_client_too_large_to_keep_is_refused(nats_url: str, database_url: str) -> None:
    """A client id or secret is kept in memory for every later authorization and sealed in each flow:
    one over ``MAX_TOKEN_CHARS`` (an answer may hold 1 MiB) is refused, not kept."""
    async with (
        hostile("--client-secret-bytes", str(MAX_TOKEN_CHARS + 1)) as base,
        running_system(nats_url, database_url, roles=["gateway", "projector"]) as system,
    ):
        per_user = {"mode": "oauth", "identity": "per_user"}
        created = await system.register("hostile", "HTTP", {"base_url": base, "auth": per_user}, auto_connect=False)
        started = await system.api.post(f"/api/v1/aggregator/servers/{created['id']}/authorize")
        assert started.status_code == 503, started.text
        assert "registration failed" in started.json()["detail"]
