"""A person answers an MCP client's request by signing in at the identity provider (OpenID Connect)
instead of pasting an API key: the consent page sends the browser there, the callback binds who the ID
token names to that one request (a cookie for its consent API only), and the grant acts with the role
and namespace the provider gave. Driven over HTTP as the browser's hops go, against a real provider
(``tests/peers/oidc_provider.py``); what a forged, replayed or hostile sign-in gets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.harness import System, running_system
from tests.oauth_client_flow import (
    Client,
    authorize,
    exchange,
    mcp_status,
    query_of,
    registered,
    request_id_of,
    tokens_of,
)
from tests.oidc_peer import OidcPeer, running_oidc_provider
from tests.peers.launch import free_port

pytestmark = pytest.mark.integration

CLIENT_ID = "toolmesh-gateway"
CLIENT_SECRET = "s3cret-of-the-gateway"
COOKIE = "toolmesh_consent"


@dataclass
class Setup:
    """The gateway, configured to sign people in at ``idp``."""

    system: System
    idp: OidcPeer

    @property
    def base(self) -> str:
        return str(self.system.api.base_url).rstrip("/")


@asynccontextmanager
async def gateway_with_provider(
    nats_url: str, database_url: str, *, issuer_slash: bool = False
) -> AsyncIterator[Setup]:
    """The gateway signing people in at a provider started for it (``issuer_slash``: whose issuer ends
    with ``/``)."""
    port = free_port()
    callback = f"http://127.0.0.1:{port}/oauth/sign-in/callback"
    async with running_oidc_provider(
        client_id=CLIENT_ID, client_secret=CLIENT_SECRET, redirect_uri=callback, issuer_slash=issuer_slash
    ) as idp:
        settings = {"jwt_issuer": idp.issuer, "jwt_jwks_url": f"{idp.url}/jwks"}
        settings |= {"oidc_client_id": CLIENT_ID, "oidc_client_secret": CLIENT_SECRET, "oidc_name": "Example SSO"}
        async with running_system(nats_url, database_url, port=port, **settings) as system:
            yield Setup(system, idp)


@pytest.fixture
async def setup(nats_url: str, database_url: str) -> AsyncIterator[Setup]:
    async with gateway_with_provider(nats_url, database_url) as found:
        yield found


async def waiting_request(http: httpx.AsyncClient, resource: str | None = None) -> tuple[Client, str]:
    """A registered client and the id of its authorization request, waiting for consent."""
    client = await registered(http)
    return client, request_id_of(await authorize(http, client, resource=resource))


async def provider_sign_in(http: httpx.AsyncClient, request_id: str) -> httpx.Response:
    """The browser's hops: the gateway's sign-in, the provider's authorization, back to the callback;
    the callback's answer (not followed)."""
    started = await http.get("/oauth/sign-in", params={"request": request_id})
    assert started.status_code == 303, started.text
    at_provider = await http.get(started.headers["location"])
    assert at_provider.status_code == 302, at_provider.text
    return await http.get(at_provider.headers["location"])


def error_of(response: httpx.Response) -> str | None:
    """The ``sign_in_error`` the callback sent the consent page (None: it signed the person in)."""
    assert response.status_code == 303, response.text
    fragment = urlsplit(response.headers["location"]).fragment
    found = parse_qs(fragment.partition("?")[2]).get("sign_in_error")
    return found[0] if found else None


async def test_a_person_signs_in_at_the_provider_and_allows_a_client(setup: Setup) -> None:
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        options = (await browser.get("/api/v1/oauth/sign-in")).json()
        assert options == {"identity_provider": "Example SSO", "sign_in_path": "/oauth/sign-in"}
        client, request_id = await waiting_request(browser)
        assert (await browser.get(f"/api/v1/oauth/requests/{request_id}")).status_code == 401  # no one yet

        started = await browser.get("/oauth/sign-in", params={"request": request_id})
        asked = query_of(started.headers["location"])
        assert asked["code_challenge_method"] == "S256" and asked["nonce"] and asked["state"], asked
        assert asked["redirect_uri"] == f"{setup.base}/oauth/sign-in/callback"
        browser.cookies.clear()
        back = await provider_sign_in(browser, request_id)
        assert error_of(back) is None
        assert urlsplit(back.headers["location"]).fragment == f"/consent/{request_id}"
        cookie = back.headers["set-cookie"].lower()
        for part in ("httponly", "samesite=strict", f"path=/api/v1/oauth/requests/{request_id.lower()}"):
            assert part in cookie, cookie

        described = (await browser.get(f"/api/v1/oauth/requests/{request_id}")).json()
        assert described["signed_in_as"] == {"name": "alice@example.test", "role": "admin", "namespace": "default"}
        decision = await browser.post(f"/api/v1/oauth/requests/{request_id}/decision", json={"allow": True})
        assert decision.status_code == 200, decision.text
        tokens = tokens_of(await exchange(browser, client, query_of(decision.json()["redirect_to"])["code"]))
        assert await mcp_status(browser, tokens.access) == 200

    apps = (await setup.system.api.get("/api/v1/auth/apps")).json()["apps"]
    (app,) = [a for a in apps if a["client_id"] == client.client_id]
    assert (app["key_id"], app["key_name"], app["role"], app["namespace"]) == (
        "jwt:alice",
        "alice@example.test",
        "admin",
        "default",
    )
    assert (await setup.system.api.delete(f"/api/v1/auth/apps/{app['id']}")).status_code == 204
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as http:
        assert await mcp_status(http, tokens.access) == 401


async def test_the_sign_in_answers_its_own_request_only(setup: Setup) -> None:
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        _, first = await waiting_request(browser)
        _, second = await waiting_request(browser)
        back = await provider_sign_in(browser, first)
        assert error_of(back) is None
        secret = browser.cookies[COOKIE]
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as other:
        other.cookies.set(COOKIE, secret)  # the same secret, presented for the other request
        refused = await other.post(f"/api/v1/oauth/requests/{second}/decision", json={"allow": True})
        assert refused.status_code == 401, refused.text
        other.cookies.clear()
        other.cookies.set(COOKIE, "forged-" + secret[7:])
        assert (await other.get(f"/api/v1/oauth/requests/{first}")).status_code == 401


async def test_a_callback_is_taken_once(setup: Setup) -> None:
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        _, request_id = await waiting_request(browser)
        started = await browser.get("/oauth/sign-in", params={"request": request_id})
        callback = (await browser.get(started.headers["location"])).headers["location"]
        assert error_of(await browser.get(callback)) is None
        replayed = await browser.get(callback)
        assert replayed.status_code == 400, replayed.text
        forged = await browser.get("/oauth/sign-in/callback", params={"code": "x", "state": "made-up"})
        assert forged.status_code == 400


@pytest.mark.parametrize(
    ("knobs", "reason"),
    [
        ({"nonce": "another-sign-in"}, "nonce"),
        ({"issuer": "http://127.0.0.1:1/elsewhere"}, "issuer"),
        ({"audience": "another-client"}, "audience"),
        ({"expired": True}, "expired"),
        ({"unsigned_kid": True}, "key"),
        ({"claims": {"toolmesh_role": "owner"}}, "toolmesh_role"),
    ],
)
async def test_an_id_token_that_does_not_check_out_signs_no_one_in(
    setup: Setup, knobs: dict[str, object], reason: str
) -> None:
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        _, request_id = await waiting_request(browser)
        await setup.idp.next(**knobs)
        back = await provider_sign_in(browser, request_id)
        error = error_of(back)
        assert error is not None and reason in error.lower(), error
        assert COOKIE not in browser.cookies
        assert (await browser.get(f"/api/v1/oauth/requests/{request_id}")).status_code == 401


async def test_a_person_of_another_namespace_gets_no_token_for_this_one(setup: Setup) -> None:
    created = await setup.system.api.post("/api/v1/endpoints", json={"name": "ops", "include": ["alpha.*"]})
    assert created.status_code == 201, created.text
    await setup.idp.login("bob")  # a user of namespace team-b
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        _, request_id = await waiting_request(browser, resource=f"{setup.base}/mcp/ops")
        assert error_of(await provider_sign_in(browser, request_id)) is None
        refused = await browser.post(f"/api/v1/oauth/requests/{request_id}/decision", json={"allow": True})
    assert refused.status_code == 404, refused.text
    assert refused.json()["error_code"] == "ENDPOINT_NOT_FOUND"
