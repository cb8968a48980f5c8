"""Who sees and disconnects which connected app: a user its own; an admin those of its namespace's
keys but never an owner's (as it never sees owner keys); the owner every one."""

from __future__ import annotations

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, System
from tests.oauth_client_flow import signed_in

pytestmark = pytest.mark.integration


async def app_ids(client: httpx.AsyncClient) -> set[str]:
    answer = await client.get("/api/v1/auth/apps")
    assert answer.status_code == 200, answer.text
    return {app["id"] for app in answer.json()["apps"]}


async def test_an_admin_neither_sees_nor_disconnects_an_owners_app(system: System) -> None:
    anonymous = httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30)
    admin = await system.create_key("ops", "admin")
    user = await system.create_key("ann", "user")
    async with anonymous, system.client_as(admin["token"]) as as_admin, system.client_as(user["token"]) as as_user:
        await signed_in(anonymous, ADMIN_TOKEN)
        await signed_in(anonymous, admin["token"])
        await signed_in(anonymous, user["token"])
        everyone = (await system.api.get("/api/v1/auth/apps")).json()["apps"]
        by_key = {app["key_name"]: app["id"] for app in everyone}
        assert set(by_key) == {"admin", "ops", "ann"}

        assert await app_ids(as_admin) == {by_key["ops"], by_key["ann"]}
        assert await app_ids(as_user) == {by_key["ann"]}
        refused = await as_admin.delete(f"/api/v1/auth/apps/{by_key['admin']}")
        assert refused.status_code == 404 and refused.json()["error_code"] == "APP_NOT_FOUND"
        assert (await as_user.delete(f"/api/v1/auth/apps/{by_key['ops']}")).status_code == 404
        assert (await as_admin.delete(f"/api/v1/auth/apps/{by_key['ann']}")).status_code == 204
        assert by_key["ann"] not in await app_ids(system.api)
