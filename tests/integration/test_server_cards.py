"""What toolmesh publishes about its MCP endpoints: each endpoint's Server Card and MCP Registry
``server.json`` (valid against the published schemas, bundled in ``tests/data/mcp_schemas``), and the
AI Catalog at ``/.well-known/ai-catalog.json``. A reader learns of an endpoint only what the endpoint
itself would tell it; a card never shows an upstream's address, credentials or connection config."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import mcp_types
import pytest

from tests.harness import ADMIN_TOKEN, System, running_system
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT, modern_call
from tests.mcp_schemas import card_validator, server_json_validator
from tests.peers.launch import PeerInfo, launch_peer

pytestmark = pytest.mark.integration
PUBLIC = "https://mesh.example.com"
UPSTREAM_TOKEN = "upstream-secret-7f3a"
DEV = {"name": "dev", "description": "What the coding agent may use", "include": ["alpha.*"]}
PATHS = ("/mcp", "/mcp/dev", "/mcp/alpha")


@dataclass
class Published:
    system: System
    peer: PeerInfo


@pytest.fixture
async def published(nats_url: str, database_url: str) -> AsyncIterator[Published]:
    async with (
        running_system(nats_url, database_url, public_url=PUBLIC) as system,
        launch_peer("http", token=UPSTREAM_TOKEN) as peer,
    ):
        config = {**peer.config, "headers": {"Authorization": f"Bearer {UPSTREAM_TOKEN}"}}
        created = await system.register("alpha", peer.transport_type, config)
        await system.wait_connected(created["id"])
        made = await system.api.post("/api/v1/endpoints", json=DEV)
        assert made.status_code == 201, made.text
        yield Published(system, peer)


def reader(system: System, token: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(base_url=str(system.api.base_url), headers=headers, timeout=30)


async def test_every_endpoint_publishes_a_valid_card_and_server_json(published: Published) -> None:
    cards, registry = card_validator(), server_json_validator()
    async with reader(published.system, ADMIN_TOKEN) as client:
        for path in PATHS:
            card = await client.get(f"{path}/server-card")
            assert card.status_code == 200, card.text
            assert card.headers["content-type"].startswith("application/mcp-server-card+json")
            assert card.headers["access-control-allow-origin"] == "*"
            document = card.json()
            assert list(cards.iter_errors(document)) == [], path
            remote = document["remotes"][0]
            assert remote["type"] == "streamable-http" and remote["url"] == f"{PUBLIC}{path}"
            assert {"2025-11-25", "2026-07-28"} <= set(remote["supportedProtocolVersions"])
            assert remote["headers"][0]["name"] == "Authorization" and remote["headers"][0]["isSecret"] is True
            meta = document["_meta"]["toolmesh/endpoint"]
            assert meta["authorization"]["resourceMetadata"] == f"{PUBLIC}/.well-known/oauth-protected-resource{path}"
            listed = await client.get(f"{path}/server.json")
            assert listed.status_code == 200, listed.text
            entry = listed.json()
            assert list(registry.iter_errors(entry)) == [], path
            assert entry["remotes"][0]["url"] == f"{PUBLIC}{path}" and entry["name"] == document["name"]
            text = card.text + listed.text
            for secret in (UPSTREAM_TOKEN, str(published.peer.url), "127.0.0.1", "connection_config"):
                assert secret not in text, (path, secret)
        names = {(await client.get(f"{p}/server-card")).json()["name"] for p in PATHS}
        assert names == {"com.example.mesh/mcp", "com.example.mesh/dev", "com.example.mesh/alpha"}
        assert (await client.get("/mcp/dev/server-card")).json()["description"] == DEV["description"]


async def test_a_card_is_revalidated_with_its_etag(published: Published) -> None:
    async with reader(published.system, ADMIN_TOKEN) as client:
        first = await client.get("/mcp/dev/server-card")
        again = await client.get("/mcp/dev/server-card", headers={"If-None-Match": first.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        other = await client.get("/mcp/dev/server-card", headers={"If-None-Match": '"stale"'})
        assert other.status_code == 200 and other.json() == first.json()


async def test_without_a_token_a_card_tells_what_the_endpoint_tells(published: Published) -> None:
    """401 for an endpoint that exists and for one that does not, as the endpoint itself answers."""
    async with reader(published.system, None) as client:
        for path in ("/mcp", "/mcp/alpha", "/mcp/dev", "/mcp/nothing-here"):
            own = await client.post(path, json=INITIALIZE, headers=MCP_ACCEPT)
            for suffix in ("/server-card", "/server.json"):
                card = await client.get(path + suffix)
                assert card.status_code == own.status_code == 401, path + suffix
                assert card.json() == own.json()
                assert card.headers["www-authenticate"] == own.headers["www-authenticate"]
        catalog = await client.get("/.well-known/ai-catalog.json")
        assert catalog.status_code == 401 and "alpha" not in catalog.text and "dev" not in catalog.text


async def test_a_user_of_another_namespace_learns_no_names(published: Published) -> None:
    key = await published.system.create_key("elsewhere", "user", namespace="team-b")
    async with reader(published.system, key["token"]) as client:
        missing = await client.get("/mcp/nothing-here/server-card")
        assert missing.status_code == 404
        for path in ("/mcp/alpha", "/mcp/dev"):
            own = await client.post(path, json=INITIALIZE, headers=MCP_ACCEPT)
            for suffix in ("/server-card", "/server.json"):
                card = await client.get(path + suffix)
                assert card.status_code == own.status_code == 404, path + suffix
                assert card.json()["error_code"] == missing.json()["error_code"] == "SERVER_NOT_FOUND"
        aggregate = await client.get("/mcp/server-card")
        assert aggregate.status_code == 200 and "alpha" not in aggregate.text
        catalog = await client.get("/.well-known/ai-catalog.json")
        assert catalog.status_code == 200
        assert [e["url"] for e in catalog.json()["entries"]] == [f"{PUBLIC}/mcp/server-card"]


async def test_a_key_limited_to_an_endpoint_sees_only_its_card(published: Published) -> None:
    key = await published.system.create_key("agent", "user", endpoints=["dev"])
    async with reader(published.system, key["token"]) as client:
        assert (await client.get("/mcp/dev/server-card")).status_code == 200
        for path in ("/mcp", "/mcp/alpha"):
            own = await client.post(path, json=INITIALIZE, headers=MCP_ACCEPT)
            card = await client.get(f"{path}/server-card")
            assert card.status_code == own.status_code == 403, path
        catalog = (await client.get("/.well-known/ai-catalog.json")).json()
        assert catalog["entries"] == [
            {
                "identifier": "urn:air:mesh.example.com:mcp:dev",
                "type": "application/mcp-server-card+json",
                "url": f"{PUBLIC}/mcp/dev/server-card",
            }
        ]


async def test_the_owner_catalog_lists_every_endpoint(published: Published) -> None:
    async with reader(published.system, ADMIN_TOKEN) as client:
        catalog = await client.get("/.well-known/ai-catalog.json")
        assert catalog.headers["content-type"].startswith("application/ai-catalog+json")
        urls = [e["url"] for e in catalog.json()["entries"]]
        assert urls == [f"{PUBLIC}{p}/server-card" for p in PATHS]


async def test_a_card_agrees_with_server_discover(published: Published) -> None:
    """The capabilities, versions and serverInfo version a card declares are what a 2026-07-28
    client's ``server/discover`` answers at the endpoint."""
    base = str(published.system.api.base_url).rstrip("/")
    async with reader(published.system, ADMIN_TOKEN) as client:
        for path in PATHS:
            card: dict[str, Any] = (await client.get(f"{path}/server-card")).json()
            answer = await modern_call(f"{base}{path}", "server/discover", {}, token=ADMIN_TOKEN)
            result = answer["result"]
            assert result["capabilities"] == card["_meta"]["toolmesh/endpoint"]["capabilities"], path
            assert set(result["supportedVersions"]) <= set(card["remotes"][0]["supportedProtocolVersions"])
            info = result["_meta"][mcp_types.SERVER_INFO_META_KEY]
            assert info["version"] == card["version"], path


async def test_no_server_or_endpoint_may_take_the_cards_name(published: Published) -> None:
    endpoint = await published.system.api.post("/api/v1/endpoints", json={**DEV, "name": "server-card"})
    assert endpoint.status_code == 422 and endpoint.json()["error_code"] == "VALIDATION_ERROR"
    body = {"name": "server-card", "transport_type": "STDIO", "connection_config": {"command": "true"}}
    server = await published.system.api.post("/api/v1/aggregator/servers", json=body)
    assert server.status_code == 422 and server.json()["error_code"] == "VALIDATION_ERROR"


async def test_the_owner_reads_another_namespace_card_at_its_address(published: Published) -> None:
    """The remote of a card the owner reads with ``?namespace=`` is that namespace's endpoint."""
    config = {**published.peer.config, "headers": {"Authorization": f"Bearer {UPSTREAM_TOKEN}"}}
    created = await published.system.register("beta", published.peer.transport_type, config, namespace="team-b")
    await published.system.wait_connected(created["id"])
    key = await published.system.create_key("member", "user", namespace="team-b")
    async with reader(published.system, ADMIN_TOKEN) as owner, reader(published.system, key["token"]) as member:
        assert (await owner.get("/mcp/beta/server-card")).status_code == 404  # not in the owner's namespace
        card = await owner.get("/mcp/beta/server-card", params={"namespace": "team-b"})
        assert card.status_code == 200 and card.json()["remotes"][0]["url"] == f"{PUBLIC}/mcp/beta?namespace=team-b"
        catalog = (await owner.get("/.well-known/ai-catalog.json", params={"namespace": "team-b"})).json()
        assert f"{PUBLIC}/mcp/beta/server-card?namespace=team-b" in [e["url"] for e in catalog["entries"]]
        own = await member.get("/mcp/beta/server-card")
        assert own.status_code == 200 and own.json()["remotes"][0]["url"] == f"{PUBLIC}/mcp/beta"


async def test_a_browser_may_read_a_card_from_another_origin(published: Published) -> None:
    asked = {"Origin": "https://registry.example.org", "Access-Control-Request-Method": "GET"}
    async with reader(published.system, None) as client:
        preflight = await client.options("/mcp/dev/server-card", headers=asked)
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == "*"
        assert "Authorization" in preflight.headers["access-control-allow-headers"]
        assert "dev" not in preflight.text
