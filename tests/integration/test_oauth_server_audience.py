"""Tokens of the gateway's authorization server are for one MCP endpoint (RFC 8707) and act as the API
key that consented: never at another endpoint, never on REST, never in another namespace, never with
more than the key's role or endpoints."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from tests.harness import System, running_system
from tests.mcp_client import mcp_session
from tests.oauth_client_flow import authorize, decide, initialize, registered, request_id_of, signed_in
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration


@dataclass
class Gateway:
    system: System
    http: httpx.AsyncClient  # no credentials of its own
    base: str
    keys: dict[str, str]  # user-a, admin-b (namespaces team-a, team-b), dev-only (default, /mcp/dev only)


async def _register_as(system: System, token: str, name: str, config: dict[str, object]) -> str:
    async with system.client_as(token) as api:
        response = await api.post(
            "/api/v1/aggregator/servers", json={"name": name, "transport_type": "STDIO", "connection_config": config}
        )
    assert response.status_code == 201, response.text
    server_id: str = response.json()["id"]
    return server_id


@pytest.fixture
async def gateway(nats_url: str, database_url: str) -> AsyncIterator[Gateway]:
    async with running_system(nats_url, database_url) as system, launch_peer("stdio") as peer:
        ids = [(await system.register(name, peer.transport_type, peer.config))["id"] for name in ("alpha", "beta")]
        keys = {
            "admin-a": (await system.create_key("admin-a", "admin", namespace="team-a"))["token"],
            "user-a": (await system.create_key("user-a", "user", namespace="team-a"))["token"],
            "admin-b": (await system.create_key("admin-b", "admin", namespace="team-b"))["token"],
        }
        ids.append(await _register_as(system, keys["admin-a"], "github", peer.config))
        ids.append(await _register_as(system, keys["admin-b"], "jira", peer.config))
        for server_id in ids:
            await system.wait_connected(server_id)
        dev = {"name": "dev", "include": ["alpha.*"]}
        assert (await system.api.post("/api/v1/endpoints", json=dev)).status_code == 201
        keys["dev-only"] = (await system.create_key("dev-only", "user", endpoints=["dev"]))["token"]
        base = str(system.api.base_url).rstrip("/")
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            yield Gateway(system, http, base, keys)


def _refused(response: httpx.Response, base: str, path: str) -> None:
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"'), challenge
    assert f'resource_metadata="{base}/.well-known/oauth-protected-resource{path}"' in challenge, challenge


async def _initialize(gw: Gateway, token: str, path: str) -> httpx.Response:
    return await initialize(gw.http, token, path)


async def test_a_token_works_only_at_the_endpoint_it_was_issued_for(gateway: Gateway) -> None:
    gw = gateway
    alpha = await signed_in(gw.http, gw.system.settings.admin_token or "", f"{gw.base}/mcp/alpha")
    assert (await _initialize(gw, alpha.access, "/mcp/alpha")).status_code == 200
    _refused(await _initialize(gw, alpha.access, "/mcp/beta"), gw.base, "/mcp/beta")
    _refused(await _initialize(gw, alpha.access, "/mcp"), gw.base, "/mcp")
    aggregate = await signed_in(gw.http, gw.system.settings.admin_token or "", f"{gw.base}/mcp")
    assert (await _initialize(gw, aggregate.access, "/mcp")).status_code == 200
    _refused(await _initialize(gw, aggregate.access, "/mcp/alpha"), gw.base, "/mcp/alpha")
    _refused(await _initialize(gw, aggregate.access, "/mcp/" + "x" * 200), gw.base, "/mcp")


async def test_a_token_without_a_resource_is_for_the_aggregate(gateway: Gateway) -> None:
    gw = gateway
    tokens = await signed_in(gw.http, gw.system.settings.admin_token or "")
    assert (await _initialize(gw, tokens.access, "/mcp")).status_code == 200
    _refused(await _initialize(gw, tokens.access, "/mcp/alpha"), gw.base, "/mcp/alpha")


async def test_no_token_opens_the_rest_api(gateway: Gateway) -> None:
    gw = gateway
    owner = await signed_in(gw.http, gw.system.settings.admin_token or "")
    for path in ("/api/v1/aggregator/servers", "/api/v1/auth/keys", "/api/v1/auth/apps"):
        response = await gw.http.get(path, headers={"Authorization": f"Bearer {owner.access}"})
        assert response.status_code == 403, (path, response.text)
    client = await registered(gw.http)
    request_id = request_id_of(await authorize(gw.http, client))
    by_token = await decide(gw.http, request_id, owner.access)
    assert by_token.status_code == 403, by_token.text
    assert (await gw.system.api.get("/metrics")).status_code == 200
    metrics = await gw.http.get("/metrics", headers={"Authorization": f"Bearer {owner.access}"})
    assert metrics.status_code == 403, metrics.text[:200]


async def test_a_token_replays_no_stored_answer_of_its_keys_writes(gateway: Gateway) -> None:
    gw = gateway
    owner = await signed_in(gw.http, gw.system.settings.admin_token or "")
    write = {"json": {"name": "made-once", "role": "user"}, "headers": {"Idempotency-Key": "k-1"}}
    made = await gw.system.api.post("/api/v1/auth/keys", **write)
    assert made.status_code == 201, made.text
    as_token = {**write["headers"], "Authorization": f"Bearer {owner.access}"}
    replayed = await gw.http.post("/api/v1/auth/keys", json=write["json"], headers=as_token)
    assert replayed.status_code == 403 and made.json()["token"] not in replayed.text, replayed.text


@pytest.mark.parametrize(
    "resource",
    [
        "https://evil.example/mcp",
        "http://127.0.0.2:{port}/mcp",
        "http://evil@127.0.0.1:{port}/mcp",
        "http://127.0.0.1:{port}/mcp?x=1",
        "http://127.0.0.1:{port}/mcp#frag",
        "http://127.0.0.1:{port}/api/v1/aggregator/servers",
        "http://127.0.0.1:{port}/mcp/a/b",
        "https://127.0.0.1:{port}/mcp",
    ],
)
async def test_a_resource_that_is_not_an_mcp_endpoint_here_is_refused(gateway: Gateway, resource: str) -> None:
    gw = gateway
    client = await registered(gw.http)
    response = await authorize(gw.http, client, resource=resource.format(port=gw.system.settings.port))
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert location.startswith(client.redirect_uri) and "error=invalid_target" in location, location
    assert "/consent/" not in location


async def test_a_user_of_one_namespace_cannot_consent_to_another_namespaces_endpoint(gateway: Gateway) -> None:
    gw = gateway
    client = await registered(gw.http)
    request_id = request_id_of(await authorize(gw.http, client, resource=f"{gw.base}/mcp/jira"))
    refused = await decide(gw.http, request_id, gw.keys["user-a"])
    assert refused.status_code == 404 and refused.json()["error_code"] == "ENDPOINT_NOT_FOUND", refused.text
    own = await signed_in(gw.http, gw.keys["user-a"])
    async with mcp_session(gw.system, token=own.access) as session:
        names = {t.name for t in (await session.list_tools()).tools}
    assert any(n.startswith("github") for n in names), names
    assert not any(n.startswith(("jira", "alpha", "beta")) for n in names), names
    other = await gw.http.post(
        "/mcp?namespace=team-b",
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        headers={"Authorization": f"Bearer {own.access}", "Accept": "application/json, text/event-stream"},
    )
    assert other.status_code == 404, other.text


async def test_a_token_has_the_role_of_the_key_that_consented(gateway: Gateway) -> None:
    gw = gateway
    owner = await signed_in(gw.http, gw.system.settings.admin_token or "")
    user = await signed_in(gw.http, gw.keys["user-a"])
    assert (await _initialize(gw, owner.access, "/mcp?namespace=team-a")).status_code == 200
    assert (await _initialize(gw, user.access, "/mcp?namespace=team-b")).status_code == 404
    apps = (await gw.system.api.get("/api/v1/auth/apps")).json()["apps"]
    assert {(a["key_name"], a["role"], a["namespace"]) for a in apps} >= {
        ("admin", "owner", "default"),
        ("user-a", "user", "team-a"),
    }


async def test_an_endpoint_limited_key_allows_only_its_own_endpoints(gateway: Gateway) -> None:
    gw = gateway
    key = gw.keys["dev-only"]
    for path in ("/mcp", "/mcp/alpha"):
        client = await registered(gw.http)
        request_id = request_id_of(await authorize(gw.http, client, resource=f"{gw.base}{path}"))
        refused = await decide(gw.http, request_id, key)
        assert refused.status_code == 403 and refused.json()["error_code"] == "FORBIDDEN", (path, refused.text)
    dev = await signed_in(gw.http, key, f"{gw.base}/mcp/dev")
    assert (await _initialize(gw, dev.access, "/mcp/dev")).status_code == 200
    _refused(await _initialize(gw, dev.access, "/mcp"), gw.base, "/mcp")
