"""The public NATS API as another service uses it: nats-py and the published AsyncAPI document only.

Nothing of toolmesh is imported by the test logic: subjects come from ``docs/asyncapi.json``,
payloads are plain JSON, replies are read as JSON. The fixtures start toolmesh (every role) on real
NATS and Postgres, and the demo MCP peer over stdio.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_client import mcp_session, text_of
from tests.oauth_client_flow import connected, status_at
from tests.peers.launch import PeerInfo, launch_peer

pytestmark = pytest.mark.integration
DOCUMENT = json.loads((Path(__file__).parents[2] / "docs" / "asyncapi.json").read_text())


def subject(channel: str) -> str:
    """The address of a channel of the published document (an operation or an event)."""
    address: str = DOCUMENT["channels"][channel]["address"]
    return address


@dataclass
class Service:
    """Another service: a NATS connection and a bearer key."""

    nc: NATS
    token: str
    system: System

    async def ask(
        self,
        operation: str,
        payload: Any,
        *,
        key: str | None = None,
        token: str | None = None,
        raw: bytes | None = None,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        headers = {"Authorization": f"Bearer {token or self.token}"}
        if key is not None:
            headers["Idempotency-Key"] = key
        data = raw if raw is not None else json.dumps(payload).encode()
        msg = await self.nc.request(subject(operation), data, timeout=30, headers=headers)
        return json.loads(msg.data), dict(msg.headers or {})

    async def ok(self, operation: str, payload: Any, **options: Any) -> Any:
        reply, _ = await self.ask(operation, payload, **options)
        assert reply["ok"] is True, reply
        return reply["result"]

    async def error(self, operation: str, payload: Any, **options: Any) -> dict[str, Any]:
        reply, _ = await self.ask(operation, payload, **options)
        assert reply["ok"] is False, reply
        error: dict[str, Any] = reply["error"]
        return error

    async def events_seq(self) -> int:
        info = await self.nc.jetstream().stream_info("TOOLMESH_EVENTS")
        return int(info.state.last_seq)


@pytest.fixture
async def service(nats_url: str, database_url: str) -> AsyncIterator[Service]:
    async with running_system(nats_url, database_url) as system:
        nc = await nats.connect(system.settings.nats_url or "", connect_timeout=10)
        try:
            yield Service(nc, ADMIN_TOKEN, system)
        finally:
            await nc.close()


@pytest.fixture
async def peer() -> AsyncIterator[PeerInfo]:
    async with launch_peer("stdio") as info:
        yield info


def register_body(name: str, peer: PeerInfo, **fields: Any) -> dict[str, Any]:
    return {"name": name, "transport_type": peer.transport_type, "connection_config": peer.config, **fields}


async def test_another_service_registers_waits_for_connected_and_calls_a_tool(service: Service, peer: PeerInfo) -> None:
    events: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()

    async def on_event(msg: Any) -> None:
        await events.put((msg.subject, json.loads(msg.data)))

    subscriptions = [
        await service.nc.subscribe(subject(channel), cb=on_event)
        for channel in ("evt.server.status_changed", "evt.tools.discovered")
    ]
    created = await service.ok("servers.register", register_body("demo", peer))
    assert created["name"] == "demo" and created["status"] == "CONNECTING"

    async def connected_with_tools() -> tuple[dict[str, Any], dict[str, Any]]:
        """The CONNECTED status event, and the tool snapshot of the new session (published first, so
        whoever sees CONNECTED can use the tools at once)."""
        status: dict[str, Any] | None = None
        snapshot: dict[str, Any] | None = None
        while status is None or snapshot is None:
            channel, event = await events.get()
            if event["server_id"] != created["id"]:
                continue
            if channel == subject("evt.server.status_changed") and event["status"] == "CONNECTED":
                status = event
            elif channel == subject("evt.tools.discovered"):
                snapshot = event
        return status, snapshot

    status, discovered = await asyncio.wait_for(connected_with_tools(), 30)
    for sub in subscriptions:
        await sub.unsubscribe()
    for event in (status, discovered):
        assert event["schema_version"] == 1 and event["namespace"] == "default" and event["event_id"]
    assert "echo" in {tool["original_name"] for tool in discovered["tools"]}

    result = await service.ok("tools.call", {"name": "demo.echo", "arguments": {"text": "over nats"}})
    assert result["content"][0]["text"] == "over nats" and result["isError"] is False
    assert result["metadata"]["server_id"] == created["id"]

    async def listed_connected() -> list[tuple[str, str]] | None:  # the read model follows the events
        listed = await service.ok("servers.list", {})
        found = [(s["id"], s["status"]) for s in listed["servers"]]
        return found if found == [(created["id"], "CONNECTED")] else None

    await eventually(listed_connected, what="servers.list to show the server CONNECTED")
    tools = await service.ok("servers.tools", {"server_id": created["id"]})
    assert "echo" in {t["original_name"] for t in tools["tools"]}
    history = await service.ok("servers.history", {"server_id": created["id"]})
    assert history and all(entry["event_type"] for entry in history)
    state = await service.ok("aggregator.state", {})
    assert state["connected_servers"] == 1 and state["total_tools"] == tools["total"]


async def test_one_idempotency_key_registers_one_server(service: Service, peer: PeerInfo) -> None:
    key = str(uuid.uuid4())
    body = register_body("once", peer, auto_connect=False)
    first, first_headers = await service.ask("servers.register", body, key=key)
    again, again_headers = await service.ask("servers.register", body, key=key)
    assert first["ok"] is True and again == first
    assert "Idempotent-Replayed" not in first_headers and again_headers.get("Idempotent-Replayed") == "true"

    # Concurrent duplicates wait for the first result instead of applying it again.
    concurrent_key = str(uuid.uuid4())
    body = register_body("twice", peer, auto_connect=False)
    replies = await asyncio.gather(*(service.ask("servers.register", body, key=concurrent_key) for _ in range(4)))
    assert all(reply == replies[0][0] for reply, _ in replies) and replies[0][0]["ok"] is True
    listed = await service.ok("servers.list", {})
    assert sorted(s["name"] for s in listed["servers"]) == ["once", "twice"]

    other = await service.error("servers.register", register_body("other", peer), key=key)
    assert other["error_code"] == "IDEMPOTENCY_KEY_REUSED"
    # Without a key, the same command is a second registration of the same name: 409.
    conflict = await service.error("servers.register", register_body("once", peer))
    assert conflict["error_code"] == "SERVER_ALREADY_EXISTS"


async def test_malformed_commands_get_validation_errors_and_publish_nothing(service: Service) -> None:
    before = await service.events_seq()
    missing = await service.error("servers.register", {"name": "broken", "transport_type": "STDIO"})
    assert missing["error_code"] == "VALIDATION_ERROR"
    assert ["connection_config"] in [item["loc"] for item in missing["context"]["errors"]]
    bad_config = await service.error(
        "servers.register", {"name": "broken", "transport_type": "HTTP", "connection_config": {"url": "x"}}
    )
    assert bad_config["error_code"] == "VALIDATION_ERROR"
    not_json = await service.error("servers.register", None, raw=b"{not json")
    assert not_json["error_code"] == "VALIDATION_ERROR"
    extra = await service.error("servers.connect", {"server_id": "x", "force": True})
    assert extra["error_code"] == "VALIDATION_ERROR"
    assert await service.events_seq() == before
    assert (await service.ok("servers.list", {}))["total"] == 0


async def test_unknown_versions_operations_and_keys_get_clear_errors(service: Service) -> None:
    version = json.loads((await service.nc.request("toolmesh.api.v9.servers.list", b"{}", timeout=10)).data)
    assert version["ok"] is False and version["error"]["error_code"] == "UNSUPPORTED_VERSION"
    assert version["error"]["context"]["supported"] == ["v1"]
    verb = json.loads((await service.nc.request("toolmesh.api.v1.servers.frobnicate", b"{}", timeout=10)).data)
    assert verb["error"]["error_code"] == "UNKNOWN_OPERATION"
    assert "servers.register" in verb["error"]["context"]["operations"]
    unauthenticated = json.loads((await service.nc.request(subject("servers.list"), b"{}", timeout=10)).data)
    assert unauthenticated["error"]["error_code"] == "UNAUTHORIZED"
    wrong = await service.error("servers.list", {}, token="not-a-key")
    assert wrong["error_code"] == "UNAUTHORIZED"


async def test_a_key_of_namespace_b_cannot_touch_namespace_a(service: Service, peer: PeerInfo) -> None:
    b_token = (await service.ok("keys.create", {"name": "admin-b", "role": "admin", "namespace": "team-b"}))["token"]
    user_a = (await service.ok("keys.create", {"name": "user-a", "role": "user", "namespace": "team-a"}))["token"]
    a_server = await service.ok("servers.register", register_body("github", peer, namespace="team-a"))
    await service.system.wait_connected(a_server["id"])
    ref = {"server_id": a_server["id"]}
    for operation, payload in (
        ("servers.get", ref),
        ("servers.tools", ref),
        ("servers.history", ref),
        ("servers.connect", ref),
        ("servers.disconnect", {**ref, "force": True}),
        ("servers.refresh", ref),
        ("servers.approve", ref),
        ("servers.remove", ref),
        ("tools.call", {"name": "echo", "server_id": a_server["id"], "arguments": {"text": "x"}}),
    ):
        error = await service.error(operation, payload, token=b_token)
        assert error["error_code"] == "SERVER_NOT_FOUND", (operation, error)
    assert (await service.error("tools.call", {"name": "github.echo"}, token=b_token))["error_code"] == "TOOL_NOT_FOUND"
    assert (await service.ok("servers.list", {}, token=b_token))["total"] == 0
    # Inside its namespace, a user key may read and call but not manage.
    assert (await service.error("servers.remove", ref, token=user_a))["error_code"] == "FORBIDDEN"
    called = await service.ok("tools.call", {"name": "github.echo", "arguments": {"text": "a"}}, token=user_a)
    assert called["content"][0]["text"] == "a"
    detail = await service.ok("servers.get", ref)
    assert detail["status"] == "CONNECTED"


async def test_rest_writes_honour_the_idempotency_key(service: Service, peer: PeerInfo) -> None:
    api = service.system.api
    body = register_body("rest-once", peer, auto_connect=False)
    key = {"Idempotency-Key": str(uuid.uuid4())}
    refused = await api.post("/api/v1/aggregator/servers", json={"name": "rest-once"}, headers=key)
    assert refused.status_code == 422  # not kept: the corrected request goes through under the same key
    first = await api.post("/api/v1/aggregator/servers", json=body, headers=key)
    again = await api.post("/api/v1/aggregator/servers", json=body, headers=key)
    assert first.status_code == again.status_code == 201 and first.json() == again.json()
    assert again.headers.get("Idempotent-Replayed") == "true" and "Idempotent-Replayed" not in first.headers
    reused = await api.post("/api/v1/aggregator/servers", json={**body, "name": "rest-other"}, headers=key)
    assert reused.status_code == 422 and reused.json()["error_code"] == "IDEMPOTENCY_KEY_REUSED"
    path = f"/api/v1/aggregator/servers/{first.json()['id']}"
    crossed = await api.delete(path, headers=key)  # another request than the POST under this key
    assert crossed.status_code == 422 and crossed.json()["error_code"] == "IDEMPOTENCY_KEY_REUSED"
    delete_key = {"Idempotency-Key": str(uuid.uuid4())}
    removed = [await api.delete(path, headers=delete_key) for _ in range(2)]
    assert [r.status_code for r in removed] == [204, 204] and removed[1].headers.get("Idempotent-Replayed") == "true"

    async def gone() -> bool:
        return (await api.get("/api/v1/aggregator/servers")).json()["total"] == 0

    await eventually(gone, what="the server to be removed")


async def test_endpoints_are_managed_over_nats_and_served_at_mcp(service: Service, peer: PeerInfo) -> None:
    created = await service.ok("servers.register", register_body("demo", peer))
    await service.system.wait_connected(created["id"])
    bundle = {"name": "echoes", "include": ["demo.echo"], "overrides": {"demo.echo": {"name": "say"}}}
    endpoint = await service.ok("endpoints.create", bundle)
    assert (endpoint["name"], endpoint["path"]) == ("echoes", "/mcp/echoes")
    assert [e["id"] for e in (await service.ok("endpoints.list", {}))["endpoints"]] == [endpoint["id"]]
    assert (await service.ok("endpoints.get", {"endpoint_id": endpoint["id"]}))["overrides"]["demo.echo"][
        "name"
    ] == "say"

    async with mcp_session(service.system, path="/mcp/echoes") as session:
        assert [t.name for t in (await session.list_tools()).tools] == ["say"]
        assert text_of(await session.call_tool("say", {"text": "bundled"})) == "bundled"

    replaced = await service.ok("endpoints.replace", {"endpoint_id": endpoint["id"], **bundle, "include": ["demo.add"]})
    assert replaced["include"] == ["demo.add"]
    refused = await service.error("endpoints.replace", {"endpoint_id": endpoint["id"], "name": "echoes"})
    assert refused["error_code"] == "VALIDATION_ERROR"
    assert await service.ok("endpoints.delete", {"endpoint_id": endpoint["id"]}) is None
    gone = await service.error("endpoints.get", {"endpoint_id": endpoint["id"]})
    assert gone["error_code"] == "ENDPOINT_NOT_FOUND"


async def test_connected_apps_are_listed_and_disconnected_over_nats(service: Service, peer: PeerInfo) -> None:
    base = str(service.system.api.base_url).rstrip("/")
    server = await service.ok("servers.register", register_body("demo", peer, namespace="team-a"))
    await service.system.wait_connected(server["id"])
    user = (await service.ok("keys.create", {"name": "ide-user", "role": "user", "namespace": "team-a"}))["token"]
    peer = (await service.ok("keys.create", {"name": "peer-user", "role": "user", "namespace": "team-a"}))["token"]
    admin_b = (await service.ok("keys.create", {"name": "admin-b", "role": "admin", "namespace": "team-b"}))["token"]
    client, tokens = await connected(base, user, client_name="Zed")
    async with mcp_session(service.system, token=tokens.access) as session:  # it acts as the user's key
        assert text_of(await session.call_tool("demo__echo", {"text": "as ide-user"})) == "as ide-user"

    (listed,) = (await service.ok("apps.list", {}, token=user))["apps"]
    assert (listed["client_name"], listed["key_name"], listed["namespace"]) == ("Zed", "ide-user", "team-a")
    assert (listed["resource"], listed["client_id"]) == (f"{base}/mcp", client.client_id)
    assert [a["id"] for a in (await service.ok("apps.list", {}))["apps"]] == [listed["id"]]  # the owner: all
    for other in (peer, admin_b):  # another user of its namespace, an admin of another one: not theirs
        assert await service.ok("apps.list", {}, token=other) == {"apps": [], "total": 0}
        refused = await service.error("apps.disconnect", {"app_id": listed["id"]}, token=other)
        assert refused["error_code"] == "APP_NOT_FOUND"
    # the app's own token is for its MCP endpoint only
    assert (await service.error("apps.list", {}, token=tokens.access))["error_code"] == "FORBIDDEN"

    assert await service.ok("apps.disconnect", {"app_id": listed["id"]}, token=user) is None
    assert await status_at(base, tokens.access) == 401
    assert (await service.ok("apps.list", {}, token=user))["total"] == 0
    for gone in (listed["id"], "not-a-uuid"):
        error = await service.error("apps.disconnect", {"app_id": gone}, token=user)
        assert error["error_code"] == "APP_NOT_FOUND"


async def test_quotas_are_managed_over_nats_and_refuse_nats_tool_calls(service: Service, peer: PeerInfo) -> None:
    created = await service.ok("servers.register", register_body("demo", peer))
    await service.system.wait_connected(created["id"])
    quota = await service.ok("quotas.create", {"scope": "server", "target": "demo", "per_day": 1})
    assert (quota["scope"], quota["target"], quota["per_day"]) == ("server", "demo", 1)
    call = {"name": "demo.echo", "arguments": {"text": "once"}}
    assert (await service.ok("tools.call", call))["isError"] is False
    refused = await service.error("tools.call", call)
    assert refused["error_code"] == "RATE_LIMITED" and refused["context"]["quota_id"] == quota["id"]
    assert (await service.ok("quotas.get", {"quota_id": quota["id"]}))["usage"] == {"day": 1}
    raised = await service.ok(
        "quotas.replace", {"quota_id": quota["id"], "scope": "server", "target": "demo", "per_day": 9}
    )
    assert raised["per_day"] == 9 and [q["id"] for q in (await service.ok("quotas.list", {}))["quotas"]] == [
        quota["id"]
    ]
    assert (await service.ok("tools.call", call))["isError"] is False
    assert await service.ok("quotas.delete", {"quota_id": quota["id"]}) is None
    assert (await service.error("quotas.get", {"quota_id": quota["id"]}))["error_code"] == "QUOTA_NOT_FOUND"
