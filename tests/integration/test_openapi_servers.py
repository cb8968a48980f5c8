"""OpenAPI servers against real NATS, Postgres and HTTP peers: an API's operations become tools.

toolmesh's own ``/openapi.json`` registered in the same toolmesh lists its operations, and the
list-servers operation called through ``/mcp`` answers the servers. The small API of
``tests/peers/openapi_app.py`` (``$ref``s, path, query and header parameters, a JSON body, an API
key) is called for every operation and checks what it received; a changed operation is held until
approved.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_client import mcp_session, text_of
from tests.peers.launch import launch_openapi_app

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
KEY = "pets-api-key-123"


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url) as system:
        yield system


@pytest.fixture
async def pets() -> AsyncIterator[str]:
    async with launch_openapi_app(KEY) as origin:
        yield origin


def pets_config(origin: str, **extra: Any) -> dict[str, Any]:
    return {"spec_url": f"{origin}/openapi.json", "credentials": {"apiKey": KEY}, **extra}


async def tools_of(system: System, server_id: str) -> dict[str, dict[str, Any]]:
    response = await system.api.get(f"{SERVERS}/{server_id}/tools", params={"include_schemas": "true"})
    assert response.status_code == 200, response.text
    return {t["original_name"]: t for t in response.json()["tools"]}


async def call(system: System, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    response = await system.api.post("/api/v1/tools/call", json={"name": name, "arguments": arguments})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def received(origin: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as client:
        answer: list[dict[str, Any]] = (await client.get(f"{origin}/received")).json()
        return answer


async def control(origin: str, **change: Any) -> None:
    async with httpx.AsyncClient() as client:
        assert (await client.post(f"{origin}/control", json=change)).status_code == 200


async def test_toolmesh_own_document_lists_its_operations_and_list_servers_answers_through_mcp(system: System) -> None:
    origin = str(system.api.base_url).rstrip("/")
    config = {"spec_url": f"{origin}/openapi.json", "headers": {"Authorization": f"Bearer {ADMIN_TOKEN}"}}
    created = await system.register("self", "OPENAPI", config)
    await system.wait_connected(created["id"])
    tools = await tools_of(system, created["id"])
    listing = next(name for name in tools if name.startswith("list_servers"))
    assert tools[listing]["input_schema"]["properties"]["status"]  # a query parameter of GET /servers
    assert any(name.startswith("register_server") for name in tools)
    async with mcp_session(system) as session:
        result = await session.call_tool(f"self__{listing}", {"limit": 10})
    assert result.is_error is not True, text_of(result)
    names = {s["name"] for s in json.loads(text_of(result))["servers"]}
    assert "self" in names


async def test_every_operation_sends_its_method_path_query_header_key_and_body(system: System, pets: str) -> None:
    created = await system.register("pets", "OPENAPI", pets_config(pets))
    await system.wait_connected(created["id"])
    tools = await tools_of(system, created["id"])
    assert set(tools) == {"listPets", "createPet", "getPet", "deletePet", "bigAnswer"}
    body_schema = tools["createPet"]["input_schema"]["properties"]["body"]
    assert body_schema["properties"]["tag"] == {"type": "string", "enum": ["cat", "dog"]}  # $ref inlined
    assert body_schema["properties"]["category"]["properties"]["parent"] == {}  # the recursion stops
    assert tools["listPets"]["input_schema"]["required"] == ["limit"]

    listed = await call(system, "pets.listPets", {"limit": 3, "tag": "cat"})
    created_pet = await call(system, "pets.createPet", {"body": {"name": "Tom", "tag": "cat"}})
    found = await call(system, "pets.getPet", {"petId": "p 1", "X-Trace": "t-9"})
    deleted = await call(system, "pets.deletePet", {"petId": "7"})
    assert not any(r.get("isError") for r in (listed, created_pet, found, deleted)), (listed, created_pet, found)
    assert found["structuredContent"]["path"] == "/v1/pets/p%201"
    seen = await received(pets)
    assert [(r["method"], r["path"]) for r in seen] == [
        ("GET", "/v1/pets"),
        ("POST", "/v1/pets"),
        ("GET", "/v1/pets/p%201"),
        ("DELETE", "/v1/pets/7"),
    ]
    assert all(r["key_ok"] for r in seen)
    assert seen[0]["query"] == [["limit", "3"], ["tag", "cat"]]
    assert seen[1]["body"] == {"name": "Tom", "tag": "cat"}
    assert seen[2]["trace"] == "t-9"


async def test_include_and_exclude_select_operations_by_tag_and_path(system: System, pets: str) -> None:
    only = await system.register("pets-only", "OPENAPI", pets_config(pets, include={"tags": ["pets"]}))
    without = await system.register(
        "pets-without", "OPENAPI", pets_config(pets, exclude={"tags": ["admin"], "paths": ["/big"]})
    )
    await system.wait_connected(only["id"])
    await system.wait_connected(without["id"])
    assert set(await tools_of(system, only["id"])) == {"listPets", "createPet"}
    assert set(await tools_of(system, without["id"])) == {"listPets", "createPet", "getPet"}


async def test_a_changed_operation_is_held_until_approved(system: System, pets: str) -> None:
    created = await system.register("pets", "OPENAPI", pets_config(pets))
    await system.wait_connected(created["id"])
    assert not (await call(system, "pets.getPet", {"petId": "1"})).get("isError")
    await control(pets, changed=True)
    refreshed = await system.api.post(f"{SERVERS}/{created['id']}/tools/refresh")
    assert refreshed.status_code in (200, 202), refreshed.text

    async def held() -> dict[str, Any] | None:
        tool = (await tools_of(system, created["id"])).get("getPet")
        return tool if tool and tool["held"] else None

    await eventually(held, timeout=20, what="getPet to be held")
    refused = await system.api.post("/api/v1/tools/call", json={"name": "pets.getPet", "arguments": {"petId": "1"}})
    assert refused.status_code == 409 and refused.json()["error_code"] == "TOOL_CHANGED"
    assert not (await call(system, "pets.listPets", {"limit": 1})).get("isError")  # unchanged: still callable
    approved = await system.api.post(f"{SERVERS}/{created['id']}/tools/approve", json={"tools": ["getPet"]})
    assert approved.status_code == 200 and approved.json()["approved"] == ["getPet"]
    after = await call(system, "pets.getPet", {"petId": "2", "cc": "x"})
    assert not after.get("isError") and after["structuredContent"]["path"] == "/v1/pets/2"
    assert (await received(pets))[-1]["query"] == [["cc", "x"]]


async def test_an_api_that_stops_answering_is_unavailable(system: System) -> None:
    async with launch_openapi_app(KEY) as origin:
        created = await system.register("pets", "OPENAPI", pets_config(origin))
        await system.wait_connected(created["id"])
    response = await system.api.post("/api/v1/tools/call", json={"name": "pets.listPets", "arguments": {"limit": 1}})
    assert response.status_code == 503, response.text
    assert response.json()["error_code"] == "SERVER_UNAVAILABLE"


async def test_a_refresh_follows_the_document_to_a_new_server_url_on_its_origin_only(system: System, pets: str) -> None:
    created = await system.register("pets", "OPENAPI", pets_config(pets))
    await system.wait_connected(created["id"])
    assert not (await call(system, "pets.listPets", {"limit": 1})).get("isError")
    await control(pets, servers=f"{pets}/v1/v2")
    refreshed = await system.api.post(f"{SERVERS}/{created['id']}/tools/refresh")
    assert refreshed.status_code in (200, 202), refreshed.text
    answered = await call(system, "pets.listPets", {"limit": 2})
    assert not answered.get("isError"), answered
    await control(pets, servers=pets.replace("127.0.0.1", "localhost") + "/v1")
    for step in ("disconnect", "connect"):
        assert (await system.api.post(f"{SERVERS}/{created['id']}/{step}")).status_code in (200, 202)
    detail = await system.wait_status(created["id"], "ERROR")
    assert "on another origin than 'spec_url'" in detail["error_message"]
    seen = await received(pets)
    assert [(r["host"], r["path"], r["query"]) for r in seen] == [
        (pets.removeprefix("http://"), "/v1/pets", [["limit", "1"]]),
        (pets.removeprefix("http://"), "/v1/v2/pets", [["limit", "2"]]),
    ]
