"""``GET /api/v1/events`` (the console's live feed), ``GET /api/v1/auth/me`` and the console's files,
against real NATS, Postgres and an MCP peer.

Team A's user and admin and team B's admin each open a stream; team A registers a server. Team
A's streams follow it to CONNECTED, team B's hears nothing of it; key events reach admins only;
revoking a key ends its stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import pytest

from tests.harness import System, eventually
from tests.integration.test_tenancy import register_as
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration
T = TypeVar("T")


def sync(check: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    """A plain check as a probe for ``eventually``."""

    async def probe() -> T:
        return check()

    return probe


@dataclass
class Stream:
    """An open event stream, read in the background into ``messages`` (SSE event name, data)."""

    messages: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    ended: bool = False
    status: int | None = None

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [data for event, data in self.messages if event == kind]


async def _read(client: httpx.AsyncClient, stream: Stream) -> None:
    async with client.stream("GET", "/api/v1/events") as response:
        stream.status = response.status_code
        event = "message"
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                stream.messages.append((event, json.loads(line.removeprefix("data: "))))
    stream.ended = True


@contextlib.asynccontextmanager
async def streams(system: System, tokens: dict[str, str]) -> AsyncIterator[dict[str, Stream]]:
    """One open stream per token, each past its ``ready`` message."""
    base = str(system.api.base_url)
    async with contextlib.AsyncExitStack() as stack:
        opened: dict[str, Stream] = {}
        tasks = []
        for who, token in tokens.items():
            client = await stack.enter_async_context(
                httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=None)
            )
            opened[who] = Stream()
            tasks.append(asyncio.create_task(_read(client, opened[who])))
        try:
            for who, stream in opened.items():
                await eventually(sync(lambda s=stream: s.of("ready")), timeout=10, what=f"{who}'s stream to be ready")
            yield opened
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def test_streams_follow_their_namespace_and_role(system: System) -> None:
    tokens = {
        who: (await system.create_key(who, role, namespace=namespace))["token"]
        for who, role, namespace in (
            ("user-a", "user", "team-a"),
            ("admin-a", "admin", "team-a"),
            ("admin-b", "admin", "team-b"),
        )
    }
    async with streams(system, tokens) as opened, launch_peer("stdio") as peer:
        assert opened["user-a"].of("ready") == [{"namespace": "team-a", "role": "user"}]
        admin_a = system.client_as(tokens["admin-a"])
        async with admin_a:
            server = await register_as(admin_a, "github", peer.config)

            def connected(who: str) -> list[dict[str, Any]]:
                return [e for e in opened[who].of("server.status_changed") if e["data"]["status"] == "CONNECTED"]

            for who in ("user-a", "admin-a"):
                await eventually(sync(lambda w=who: connected(w)), what=f"{who} to see github connect")
            user = opened["user-a"]
            (registered,) = user.of("server.registered")
            assert registered["server_id"] == server["id"] and registered["namespace"] == "team-a"
            assert registered["data"]["name"] == "github" and "sealed_config" not in registered["data"]
            assert registered["actor"] == "admin-a"
            discovered = await eventually(sync(lambda: user.of("tools.discovered")), what="the tool snapshot")
            assert discovered[0]["data"]["tool_count"] == len(discovered[0]["data"]["tools"]) > 0
            ordered = [data["seq"] for event, data in user.messages if event != "ready"]
            assert ordered == sorted(ordered)

            # key events: admins of the namespace only
            await system.create_key("ci-a", "user", namespace="team-a")
            await eventually(sync(lambda: opened["admin-a"].of("key.created")), what="admin-a to see the new key")
            elsewhere = await register_as(system.api, "jira", peer.config)  # the owner's, in default
            assert elsewhere["namespace"] == "default"
            await system.wait_connected(elsewhere["id"])

            # team B's admin heard nothing of team A, nor of the default namespace (events arrive in order:
            # whatever came before its own key's creation would be here by now)
            another = await system.create_key("ci-b", "user", namespace="team-b")
            await eventually(sync(lambda: opened["admin-b"].of("key.created")), what="admin-b to see its own namespace")
            assert [e for e, _ in opened["admin-b"].messages] == ["ready", "key.created"]
            assert opened["admin-b"].of("key.created")[0]["data"]["key_id"] == another["id"]
            assert not opened["user-a"].of("key.created")


async def test_a_revoked_key_s_stream_ends(system: System) -> None:
    key = await system.create_key("watcher", "user", namespace="default")
    async with streams(system, {"watcher": key["token"]}) as opened:
        assert not opened["watcher"].ended
        response = await system.api.delete(f"/api/v1/auth/keys/{key['id']}")
        assert response.status_code == 204
        await eventually(sync(lambda: opened["watcher"].ended), timeout=10, what="the revoked key's stream to end")


async def test_the_stream_needs_a_key_and_stays_in_its_namespace(system: System) -> None:
    anonymous = await system.api.get("/api/v1/events", headers={"Authorization": ""})
    assert anonymous.status_code == 401
    key = await system.create_key("nosy", "user", namespace="team-a")
    headers = {"Authorization": f"Bearer {key['token']}"}
    elsewhere = await system.api.get("/api/v1/events", params={"namespace": "team-b"}, headers=headers)
    assert (elsewhere.status_code, elsewhere.json()["error_code"]) == (404, "NAMESPACE_NOT_FOUND")
    me = await system.api.get("/api/v1/auth/me", headers=headers)
    assert me.json() == {"key_id": key["id"], "name": "nosy", "role": "user", "namespace": "team-a", "manages": False}
    assert (await system.api.get("/api/v1/auth/me")).json()["role"] == "owner"


async def test_the_console_is_served_with_a_strict_policy(system: System) -> None:
    home = await system.api.get("/", follow_redirects=False)
    assert (home.status_code, home.headers["location"]) == (307, "/ui/")
    page = await system.api.get("/ui/", headers={"Authorization": ""})
    assert page.status_code == 200 and '<script type="module" src="js/main.js">' in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy
    for asset in ("js/main.js", "js/pages/index.js", "console.css"):
        response = await system.api.get(f"/ui/{asset}")
        assert response.status_code == 200, asset
        assert response.headers["x-content-type-options"] == "nosniff"
    assert (await system.api.get("/ui/js/nope.js")).status_code == 404
    assert "/ui/" not in json.dumps((await system.api.get("/openapi.json")).json()["paths"])
