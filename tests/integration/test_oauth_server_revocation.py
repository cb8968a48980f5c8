"""Connected apps ended from the gateway's side: by the key that consented, an admin of its namespace
(no one else: 404), by revoking the key itself, and on every gateway at once (not after the 30 s
cache of authenticated tokens)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from tests.harness import RoleProcess, System, eventually, running_system
from tests.oauth_client_flow import mcp_status, refresh, registered, signed_in
from toolmesh_cli.embedded import free_port
from toolmesh_cli.roles import seed_owner_key

pytestmark = pytest.mark.integration
REVOCATION_BOUND_SECONDS = 5.0
"""Well under the authenticator's 30 s cache: only the event stream can end a token this fast."""


@dataclass
class Gateway:
    system: System
    http: httpx.AsyncClient
    keys: dict[str, dict[str, str]]  # user-a, user-a2, admin-a (team-a), admin-b (team-b): create bodies


@pytest.fixture
async def gateway(nats_url: str, database_url: str) -> AsyncIterator[Gateway]:
    async with running_system(nats_url, database_url, oauth_registrations_per_minute=0) as system:
        keys = {
            name: await system.create_key(name, role, namespace=namespace)
            for name, role, namespace in (
                ("user-a", "user", "team-a"),
                ("user-a2", "user", "team-a"),
                ("admin-a", "admin", "team-a"),
                ("admin-b", "admin", "team-b"),
            )
        }
        async with httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http:
            yield Gateway(system, http, keys)


async def _app_id(gw: Gateway, token: str) -> str:
    async with gw.system.client_as(token) as api:
        listed = await api.get("/api/v1/auth/apps")
    assert listed.status_code == 200, listed.text
    apps = listed.json()["apps"]
    assert len(apps) == 1, apps
    app_id: str = apps[0]["id"]
    return app_id


async def _delete(gw: Gateway, token: str, app_id: str) -> int:
    async with gw.system.client_as(token) as api:
        return (await api.delete(f"/api/v1/auth/apps/{app_id}")).status_code


async def test_only_the_consenting_key_and_its_namespaces_admins_end_an_app(gateway: Gateway) -> None:
    gw = gateway
    user = gw.keys["user-a"]["token"]
    tokens = await signed_in(gw.http, user)
    app_id = await _app_id(gw, user)
    for stranger in ("user-a2", "admin-b"):
        assert await _delete(gw, gw.keys[stranger]["token"], app_id) == 404, stranger
        async with gw.system.client_as(gw.keys[stranger]["token"]) as api:
            assert (await api.get("/api/v1/auth/apps")).json()["total"] == 0, stranger
    assert await _delete(gw, user, "not-a-uuid") == 404
    assert await mcp_status(gw.http, tokens.access) == 200
    assert await _delete(gw, user, app_id) == 204
    assert await mcp_status(gw.http, tokens.access) == 401
    assert await _delete(gw, user, app_id) == 404

    again = await signed_in(gw.http, user)
    assert await _delete(gw, gw.keys["admin-a"]["token"], await _app_id(gw, user)) == 204
    assert await mcp_status(gw.http, again.access) == 401


async def test_an_admin_cannot_end_the_owners_apps(gateway: Gateway) -> None:
    gw = gateway
    owner = gw.system.settings.admin_token or ""
    admin_default = await gw.system.create_key("admin-d", "admin")
    tokens = await signed_in(gw.http, owner)
    app_id = (await gw.system.api.get("/api/v1/auth/apps")).json()["apps"][0]["id"]
    assert await _delete(gw, admin_default["token"], app_id) == 404
    assert await mcp_status(gw.http, tokens.access) == 200


async def test_revoking_the_key_that_consented_ends_its_apps(gateway: Gateway) -> None:
    gw = gateway
    key = gw.keys["user-a"]
    tokens = await signed_in(gw.http, key["token"])
    assert await mcp_status(gw.http, tokens.access) == 200
    assert (await gw.system.api.delete(f"/api/v1/auth/keys/{key['id']}")).status_code == 204
    assert await mcp_status(gw.http, tokens.access) == 401
    refreshed = await gw.http.post(
        "/token", data={"grant_type": "refresh_token", "refresh_token": tokens.refresh, "client_id": "x"}
    )
    assert refreshed.status_code in (400, 401), refreshed.text
    assert (await gw.system.api.get("/api/v1/auth/apps")).json()["total"] == 0


async def _answering(http: httpx.AsyncClient) -> bool:
    try:
        return (await http.get("/.well-known/oauth-authorization-server")).status_code == 200
    except httpx.TransportError:
        return False


async def test_an_app_ended_on_one_gateway_is_refused_by_another_at_once(gateway: Gateway) -> None:
    gw = gateway
    port_b = free_port()
    b = RoleProcess("gateway", gw.system.settings, env={"TOOLMESH_PORT": str(port_b)})
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_b}", timeout=10) as other:
            await eventually(lambda: _answering(other), timeout=60, what="gateway B to answer")
            user = gw.keys["user-a"]
            by_app = await signed_in(gw.http, user["token"])
            by_key = await signed_in(other, gw.keys["admin-a"]["token"])  # consented and exchanged on B
            for token in (by_app.access, by_key.access):
                assert await mcp_status(other, token) == 200  # B caches the grant now
                assert await mcp_status(gw.http, token) == 200
            assert await _delete(gw, user["token"], await _app_id(gw, user["token"])) == 204

            async def refused(token: str) -> bool:
                return await mcp_status(other, token) == 401

            await eventually(lambda: refused(by_app.access), timeout=REVOCATION_BOUND_SECONDS, what="B to refuse")
            admin_a = gw.keys["admin-a"]["id"]
            assert (await gw.system.api.delete(f"/api/v1/auth/keys/{admin_a}")).status_code == 204
            await eventually(lambda: refused(by_key.access), timeout=REVOCATION_BOUND_SECONDS, what="B to refuse")
    finally:
        b.terminate()


async def test_a_new_admin_token_ends_the_apps_the_old_one_allowed(gateway: Gateway) -> None:
    gw = gateway
    client = await registered(gw.http)
    old = await signed_in(gw.http, gw.system.settings.admin_token or "", client=client)
    await seed_owner_key(gw.system.backends, "rotated-admin-token")  # what start-up does with a new token
    assert await mcp_status(gw.http, old.access) == 401
    assert (await refresh(gw.http, client.client_id, old.refresh)).status_code == 400
    kept = await signed_in(gw.http, "rotated-admin-token", client=client)
    await seed_owner_key(gw.system.backends, "rotated-admin-token")  # a restart with the same token
    assert await mcp_status(gw.http, kept.access) == 200


async def test_an_app_whose_tokens_expired_is_listed_no_more(gateway: Gateway) -> None:
    """Both of its tokens expired (set in the store: the shortest lifetimes are minutes), the app is
    gone from the list (before: listed for ever, though nothing could use it)."""
    token = gateway.keys["user-a"]["token"]
    await signed_in(gateway.http, token)
    app_id = await _app_id(gateway, token)
    await gateway.system.backends.db.execute(
        "UPDATE mcp.oauth_grants SET access_expires_at = now() - interval '1 second', "
        "refresh_expires_at = now() - interval '1 second' WHERE grant_id = $1::uuid",
        app_id,
    )
    async with gateway.system.client_as(token) as api:
        assert (await api.get("/api/v1/auth/apps")).json() == {"apps": [], "total": 0}
