"""What a hostile MCP client, a forged token or a hostile identity provider gets from the consent page's
sign-in at the identity provider (``test_oauth_server_identity_provider.py`` drives the flow as it is
meant to go; its fixture and helpers are reused here)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from tests.harness import eventually
from tests.integration.test_oauth_server_identity_provider import (
    COOKIE,
    Setup,
    error_of,
    gateway_with_provider,
    provider_sign_in,
    setup,
    waiting_request,
)
from tests.oauth_client_flow import exchange, query_of, refresh, status_at, tokens_of

pytestmark = pytest.mark.integration
__all__ = ["setup"]  # the fixture, imported for the tests of this module


async def test_an_id_token_of_another_algorithm_under_the_providers_key_id_signs_no_one_in(setup: Setup) -> None:
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        _, request_id = await waiting_request(browser)
        await setup.idp.next(wrong_alg=True)  # ES256, naming the provider's RSA key
        error = error_of(await provider_sign_in(browser, request_id))
        assert error is not None and "algorithm" in error.lower(), error
        assert COOKIE not in browser.cookies


async def test_a_bearer_token_of_another_algorithm_under_the_providers_key_id_is_refused(setup: Setup) -> None:
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as http:
        _, request_id = await waiting_request(http)
        (key,) = (await http.get(f"{setup.idp.url}/jwks")).json()["keys"]
        claims = {"iss": setup.idp.url, "sub": "mallory", "toolmesh_role": "admin", "toolmesh_namespace": "default"}
        forged = jwt.encode(claims, ec.generate_private_key(ec.SECP256R1()), "ES256", headers={"kid": key["kid"]})
        refused = await http.post(
            f"/api/v1/oauth/requests/{request_id}/decision",
            json={"allow": True},
            headers={"Authorization": f"Bearer {forged}"},
        )
    assert refused.status_code == 401, refused.text
    assert refused.json()["error_code"] == "UNAUTHORIZED"


async def test_two_callbacks_of_one_sign_in_in_parallel_sign_in_once(setup: Setup) -> None:
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        _, request_id = await waiting_request(browser)
        started = await browser.get("/oauth/sign-in", params={"request": request_id})
        callback = (await browser.get(started.headers["location"])).headers["location"]
        answers = await asyncio.gather(browser.get(callback), browser.get(callback))
    assert sorted(a.status_code for a in answers) == [303, 400], [a.text for a in answers]
    assert sum("set-cookie" in a.headers for a in answers) == 1


async def test_an_admin_of_another_namespace_neither_sees_nor_ends_a_persons_app(setup: Setup) -> None:
    await setup.idp.login("bob")  # a user of namespace team-b
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        client, request_id = await waiting_request(browser)
        assert error_of(await provider_sign_in(browser, request_id)) is None
        decision = await browser.post(f"/api/v1/oauth/requests/{request_id}/decision", json={"allow": True})
        tokens = tokens_of(await exchange(browser, client, query_of(decision.json()["redirect_to"])["code"]))
    admin = await setup.system.create_key("admin-of-default", "admin")
    async with setup.system.client_as(admin["token"]) as other:
        assert (await other.get("/api/v1/auth/apps")).json() == {"apps": [], "total": 0}
        (app,) = (await setup.system.api.get("/api/v1/auth/apps")).json()["apps"]
        refused = await other.delete(f"/api/v1/auth/apps/{app['id']}")
        assert refused.status_code == 404, refused.text
    assert await status_at(setup.base, tokens.access) == 200
    their_admin = await setup.system.create_key("admin-of-team-b", "admin", namespace="team-b")
    async with setup.system.client_as(their_admin["token"]) as theirs:
        assert [a["id"] for a in (await theirs.get("/api/v1/auth/apps")).json()["apps"]] == [app["id"]]
        assert (await theirs.delete(f"/api/v1/auth/apps/{app['id']}")).status_code == 204
    assert await status_at(setup.base, tokens.access) == 401


async def test_a_provider_whose_issuer_ends_with_a_slash_signs_people_in(nats_url: str, database_url: str) -> None:
    async with (
        gateway_with_provider(nats_url, database_url, issuer_slash=True) as slashed,
        httpx.AsyncClient(base_url=slashed.base, timeout=30) as browser,
    ):
        _, request_id = await waiting_request(browser)
        assert error_of(await provider_sign_in(browser, request_id)) is None
        described = (await browser.get(f"/api/v1/oauth/requests/{request_id}")).json()
        assert described["signed_in_as"]["name"] == "alice@example.test", described


async def test_an_id_token_whose_nonce_is_not_ascii_signs_no_one_in(setup: Setup) -> None:
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        _, request_id = await waiting_request(browser)
        await setup.idp.next(nonce="n\u00e9ant")
        error = error_of(await provider_sign_in(browser, request_id))
        assert error is not None and "nonce" in error.lower(), error
        assert COOKIE not in browser.cookies


async def test_a_name_the_person_chose_is_not_who_they_are_recorded_as(setup: Setup) -> None:
    """An unverified email (or a display name) is the person's to choose: the consent page and the
    audit log name them by their subject then (before: ``ceo@example.test``)."""
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        _, request_id = await waiting_request(browser)
        await setup.idp.next(claims={"email": "ceo@example.test", "email_verified": False, "name": "The CEO"})
        assert error_of(await provider_sign_in(browser, request_id)) is None
        described = (await browser.get(f"/api/v1/oauth/requests/{request_id}")).json()
    assert described["signed_in_as"]["name"] == "alice", described


async def test_a_persons_app_rotates_its_refresh_token_and_a_replay_ends_it(setup: Setup) -> None:
    await setup.idp.login("bob")
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        client, request_id = await waiting_request(browser)
        assert error_of(await provider_sign_in(browser, request_id)) is None
        decision = await browser.post(f"/api/v1/oauth/requests/{request_id}/decision", json={"allow": True})
        first = tokens_of(await exchange(browser, client, query_of(decision.json()["redirect_to"])["code"]))
        second = tokens_of(await refresh(browser, client.client_id, first.refresh))
        assert await status_at(setup.base, second.access) == 200
        replayed = await refresh(browser, client.client_id, first.refresh)
        assert replayed.status_code == 400, replayed.text
    assert await status_at(setup.base, second.access) == 401

    async def recorded() -> list[dict[str, Any]] | None:
        entries = (await setup.system.api.get("/api/v1/audit", params={"namespace": "team-b"})).json()["entries"]
        apps = [e for e in entries if str(e["event"]).startswith("app.")]
        return apps if len(apps) == 2 else None

    disconnected, connected = await eventually(recorded, what="app.connected and app.disconnected of bob's app")
    assert (connected["event"], disconnected["event"]) == ("app.connected", "app.disconnected")
    for entry in (connected, disconnected):
        assert (entry["actor"], entry["namespace"]) == ("bob@example.test", "team-b"), entry
        assert entry["details"]["key_id"] == "jwt:bob", entry
    assert disconnected["details"]["reason"] == "refresh token replayed"


async def test_a_persons_app_ends_a_refresh_lifetime_after_consent_however_often_refreshed(setup: Setup) -> None:
    """A person of the identity provider has no key whose revocation would end their apps: refreshing
    never carries an app past ``TOOLMESH_OAUTH_REFRESH_TOKEN_SECONDS`` from the consent (before:
    each refresh granted that long again, so the app never ended)."""
    async with httpx.AsyncClient(base_url=setup.base, timeout=30) as browser:
        client, request_id = await waiting_request(browser)
        assert error_of(await provider_sign_in(browser, request_id)) is None
        decision = await browser.post(f"/api/v1/oauth/requests/{request_id}/decision", json={"allow": True})
        first = tokens_of(await exchange(browser, client, query_of(decision.json()["redirect_to"])["code"]))
        tokens_of(await refresh(browser, client.client_id, first.refresh))
    (app,) = [
        a
        for a in (await setup.system.api.get("/api/v1/auth/apps")).json()["apps"]
        if a["client_id"] == client.client_id
    ]
    created = datetime.fromisoformat(app["created_at"])
    lifetime = timedelta(seconds=setup.system.settings.oauth_refresh_token_seconds)
    assert app["refreshed_at"] is not None
    assert datetime.fromisoformat(app["refresh_expires_at"]) == created + lifetime, app
