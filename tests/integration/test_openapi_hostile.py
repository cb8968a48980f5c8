"""Hostile OpenAPI documents and answers: what an API's document or a caller's arguments cannot make
toolmesh do (reach metadata addresses, read files or other documents, leave the operation's path,
hold a huge document or answer in memory), and what a weak key cannot register."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.harness import System, running_system
from tests.integration.test_openapi_servers import KEY, call, control, pets_config, received, tools_of
from tests.peers.launch import launch_openapi_app

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
METADATA = "http://169.254.169.254/latest"


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url) as system:
        yield system


@pytest.fixture
async def pets() -> AsyncIterator[str]:
    async with launch_openapi_app(KEY) as origin:
        yield origin


def inline(servers: str) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": servers}], "paths": {}}


async def test_a_document_whose_servers_name_a_metadata_host_is_refused(system: System, pets: str) -> None:
    await control(pets, servers=METADATA)
    created = await system.register("meta", "OPENAPI", pets_config(pets))
    detail = await system.wait_status(created["id"], "ERROR")
    assert "egress policy" in detail["error_message"] and "169.254.169.254" in detail["error_message"]
    assert await received(pets) == []


@pytest.mark.parametrize(
    "config",
    [
        {"spec": inline(METADATA)},
        {"spec": inline("https://api.example.com"), "base_url": "http://[fe80::1]/v1"},
        {"spec_url": "http://metadata.google.internal/openapi.json"},
        {"spec": inline("http://[::1")},
        {"spec": inline("https://api.example.com:99999/v1")},
    ],
)
async def test_a_metadata_url_is_refused_at_registration(system: System, config: dict[str, Any]) -> None:
    body = {"name": "meta", "transport_type": "OPENAPI", "connection_config": config}
    response = await system.api.post(SERVERS, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error_code"] == "VALIDATION_ERROR"


async def test_an_agent_key_may_not_point_an_openapi_server_at_loopback(system: System, pets: str) -> None:
    agent = await system.create_key("weak", "agent")
    loopback = [
        pets_config(pets),
        {"spec": inline("https://api.example.com"), "base_url": f"{pets}/v1"},
        {"spec": inline(f"{pets}/v1")},
    ]
    async with system.client_as(agent["token"]) as client:
        for config in loopback:
            body = {"name": "sneaky", "transport_type": "OPENAPI", "connection_config": config}
            response = await client.post(SERVERS, json=body)
            assert response.status_code == 403, response.text
            assert response.json()["context"]["action"] == "reach loopback or private addresses"
    assert await received(pets) == []


async def test_a_huge_document_is_refused(system: System, pets: str) -> None:
    await control(pets, huge=True)
    created = await system.register("huge", "OPENAPI", pets_config(pets))
    detail = await system.wait_status(created["id"], "ERROR")
    assert "longer than 4194304 bytes" in detail["error_message"]


async def test_references_to_files_and_other_documents_are_not_followed(system: System, pets: str) -> None:
    await control(pets, remote_refs=True)
    created = await system.register("refs", "OPENAPI", pets_config(pets))
    await system.wait_connected(created["id"])
    body = (await tools_of(system, created["id"]))["createPet"]["input_schema"]["properties"]["body"]
    assert body["properties"]["secret"] == {} and body["properties"]["remote"] == {}
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{pets}/canary")).json() == {"reads": 0}


@pytest.mark.parametrize(
    ("pet_id", "path"),
    [
        ("../admin/secret", "/v1/pets/..%2Fadmin%2Fsecret"),
        ("..", "/v1/pets/%2E%2E"),
        ("a?b=1#c", "/v1/pets/a%3Fb%3D1%23c"),
    ],
)
async def test_a_path_parameter_cannot_leave_the_operation_path(
    system: System, pets: str, pet_id: str, path: str
) -> None:
    created = await system.register("pets", "OPENAPI", pets_config(pets))
    await system.wait_connected(created["id"])
    result = await call(system, "pets.getPet", {"petId": pet_id})
    assert not result.get("isError"), result
    seen = await received(pets)
    assert [(r["method"], r["path"], r["query"]) for r in seen] == [("GET", path, [])]


async def test_an_oversized_answer_is_cut_with_an_error(system: System, pets: str) -> None:
    created = await system.register("pets", "OPENAPI", pets_config(pets))
    await system.wait_connected(created["id"])
    result = await call(system, "pets.bigAnswer", {})
    assert result["isError"] is True
    assert result["content"][0]["text"] == "GET /big: the answer is longer than 4194304 bytes and was cut off"


def reference_bomb(operations: int) -> dict[str, Any]:
    """A small document whose every operation's body refers to one schema that doubles at each of
    15 levels (20,000 nodes once inlined): each alone stays under the per-schema bound."""
    schemas: dict[str, Any] = {"s15": {"type": "string"}}
    for i in range(15):
        twice = {"$ref": f"#/components/schemas/s{i + 1}"}
        schemas[f"s{i}"] = {"type": "object", "properties": {"a": twice, "b": twice}}
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/s0"}}}}
    paths = {f"/p{i}": {"post": {"requestBody": {"$ref": "#/components/requestBodies/r"}}} for i in range(operations)}
    document = inline("https://api.example.com")
    document.update(paths=paths, components={"schemas": schemas, "requestBodies": {"r": body}})
    return document


async def test_a_document_whose_references_inline_to_millions_of_nodes_is_refused(system: System) -> None:
    created = await system.register("bomb", "OPENAPI", {"spec": reference_bomb(200)})
    detail = await system.wait_status(created["id"], "ERROR")
    assert "inline to more than 500000 nodes in all" in detail["error_message"]


YAML_HEAD = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("[" * 100_000, "the document is nested too deeply"),
        ('{"openapi": "3.0.3", "paths": {}, "x": ' + "9" * 5000 + "}", "integer string conversion"),
        (YAML_HEAD + "x: " + "9" * 5000, "integer string conversion"),
        (YAML_HEAD + "x: !!binary /w==", "binary has no JSON counterpart"),
        (YAML_HEAD + "x: !!set {a}", "set has no JSON counterpart"),
    ],
)
async def test_a_document_json_cannot_hold_puts_the_server_in_error(
    system: System, pets: str, raw: str, reason: str
) -> None:
    await control(pets, raw=raw)
    created = await system.register("odd", "OPENAPI", pets_config(pets))
    detail = await system.wait_status(created["id"], "ERROR")
    assert "unusable OpenAPI document: " in detail["error_message"] and reason in detail["error_message"]


async def test_credentials_do_not_follow_a_document_to_another_origin(system: System, pets: str) -> None:
    async with launch_openapi_app(KEY) as elsewhere:
        await control(pets, servers=f"{elsewhere}/v1")
        created = await system.register("moved", "OPENAPI", pets_config(pets))
        detail = await system.wait_status(created["id"], "ERROR")
        assert "on another origin than 'spec_url'" in detail["error_message"]
        assert await received(elsewhere) == []
        chosen = await system.register("chosen", "OPENAPI", pets_config(pets, base_url=f"{elsewhere}/v1"))
        await system.wait_connected(chosen["id"])
        result = await call(system, "chosen.listPets", {"limit": 1})
        assert not result.get("isError"), result
        assert [(r["path"], r["key_ok"]) for r in await received(elsewhere)] == [("/v1/pets", True)]


@pytest.mark.parametrize("servers", ["http://[::1", "https://[zz]/v1", "http://api.example.com:99999/v1"])
async def test_a_document_naming_no_valid_url_puts_the_server_in_error(system: System, pets: str, servers: str) -> None:
    await control(pets, servers=servers)
    created = await system.register("bad", "OPENAPI", pets_config(pets))
    detail = await system.wait_status(created["id"], "ERROR")
    assert "unusable OpenAPI document" in detail["error_message"] and "not a valid URL" in detail["error_message"]


async def test_a_reference_that_is_no_valid_uri_becomes_an_empty_schema(system: System) -> None:
    document = inline("https://api.example.com")
    schema = {"type": "object", "properties": {"a": {"$ref": "http://[::1"}, "b": {"$ref": "//[zz]/x"}}}
    body = {"content": {"application/json": {"schema": schema}}}
    document["paths"] = {"/a": {"post": {"operationId": "make", "requestBody": body}}}
    created = await system.register("refs", "OPENAPI", {"spec": document})
    await system.wait_connected(created["id"])
    properties = (await tools_of(system, created["id"]))["make"]["input_schema"]["properties"]["body"]["properties"]
    assert properties == {"a": {}, "b": {}}


@pytest.mark.parametrize("header", ["Schl\u00fcssel", "X-Key\r\nX-Injected: 1", "Content-Length"])
async def test_a_security_scheme_naming_no_sendable_header_is_not_applied(
    system: System, pets: str, header: str
) -> None:
    document = inline("https://api.example.com")
    document["paths"] = {"/pets": {"get": {"operationId": "listPets", "security": [{"key": []}]}}}
    document["components"] = {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": header}}}
    config = {"spec": document, "base_url": f"{pets}/v1", "credentials": {"key": KEY}}
    created = await system.register("odd", "OPENAPI", config)
    await system.wait_connected(created["id"])
    result = await call(system, "odd.listPets", {})
    assert result["isError"] is True and "answered HTTP 401" in result["content"][0]["text"], result
    assert [(r["path"], r["key_ok"]) for r in await received(pets)] == [("/v1/pets", False)]


async def test_an_answer_nested_too_deeply_is_text_without_structured_content(system: System, pets: str) -> None:
    created = await system.register("pets", "OPENAPI", pets_config(pets))
    await system.wait_connected(created["id"])
    await control(pets, answer="[" * 100_000)
    result = await call(system, "pets.getPet", {"petId": "1"})
    assert result.get("isError") is not True, result
    assert result["content"][0]["text"] == "[" * 100_000
    assert "structuredContent" not in result
