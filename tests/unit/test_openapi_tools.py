"""OpenAPI documents as tools (no I/O): the config rules, ``$ref`` inlining with cycles and refused
references, tool names and schemas, include/exclude, and the request a call builds."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from toolmesh.contracts.connection_config import TransportType, config_problems
from toolmesh.contracts.openapi_config import INLINE_SPEC_MAX_BYTES
from toolmesh.credentials import mask_config, secret_values
from toolmesh_session_worker.upstream.openapi.document import DocumentProblem, api_base, parse_document
from toolmesh_session_worker.upstream.openapi.operations import MAX_OPERATIONS, Selection, read_operations
from toolmesh_session_worker.upstream.openapi.requests import ArgumentProblem, build_call, security_schemes
from toolmesh_session_worker.upstream.openapi.schemas import Dereferencer

KEEP_ALL = Selection({}, {})


def doc(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


def problems(config: dict[str, Any]) -> dict[str, str]:
    return dict(config_problems(TransportType.OPENAPI, config))


def test_openapi_config_needs_exactly_one_document() -> None:
    assert "spec_url" in problems({})
    assert "spec_url" in problems(
        {"spec_url": "https://a.example/o.json", "spec": doc({}, servers=[{"url": "https://a.example"}])}
    )
    assert problems({"spec_url": "https://a.example/o.json"}) == {}


def test_openapi_config_checks_urls_selectors_credentials_and_inline_size() -> None:
    assert "must use https" in problems({"spec_url": "http://a.example/o.json"})["spec_url"]
    assert (
        "link-local"
        in problems({"spec_url": "https://a.example/o.json", "base_url": "https://169.254.169.254/"})["base_url"]
    )
    assert (
        "unknown key 'methods'"
        in problems({"spec_url": "https://a.example/o", "include": {"methods": ["GET"]}})["include"]
    )
    assert (
        "list of non-empty strings"
        in problems({"spec_url": "https://a.example/o", "exclude": {"tags": "x"}})["exclude"]
    )
    assert "credentials" in problems({"spec_url": "https://a.example/o", "credentials": {"k": 1}})
    big = doc({}, servers=[{"url": "https://a.example"}], info={"title": "x" * INLINE_SPEC_MAX_BYTES, "version": "1"})
    assert "give 'spec_url' instead" in problems({"spec": big})["spec"]
    assert (
        "only OpenAPI 3.0 and 3.1"
        in problems({"spec": {"swagger": "2.0", "paths": {}}, "base_url": "https://a.example"})["spec"]
    )
    assert "give 'base_url'" in problems({"spec": doc({})})["spec"]


def test_credentials_are_masked_and_known_to_the_redactor() -> None:
    config = {"spec_url": "https://a.example/o.json?token=abc", "credentials": {"apiKey": "s3cret"}}
    assert mask_config(config)["credentials"] == {"apiKey": "***"}
    assert "abc" not in mask_config(config)["spec_url"]
    assert {"s3cret", "abc"} <= {s.value for s in secret_values(config)}


def test_recursive_schemas_stop_and_outside_references_become_empty() -> None:
    document = doc(
        {},
        components={
            "schemas": {
                "Node": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}},
                },
                "A": {"$ref": "#/components/schemas/B"},
                "B": {"$ref": "#/components/schemas/A"},
                "File": {"$ref": "file:///etc/passwd"},
                "Remote": {"$ref": "https://evil.example/s.json#/x"},
                "Relative": {"$ref": "other.yaml#/x"},
            }
        },
    )
    deref = Dereferencer(document)
    node = deref.schema({"$ref": "#/components/schemas/Node"})
    assert node == {"type": "object", "properties": {"kids": {"type": "array", "items": {}}}}
    for name in ("A", "File", "Remote", "Relative"):
        assert deref.schema({"$ref": f"#/components/schemas/{name}"}) == {}


def test_an_exponential_document_is_cut_to_a_bounded_schema() -> None:
    schemas: dict[str, Any] = {"S0": {"type": "string"}}
    for i in range(1, 40):  # each level refers to the one below twice: 2**39 nodes if inlined whole
        below = {"$ref": f"#/components/schemas/S{i - 1}"}
        schemas[f"S{i}"] = {"type": "object", "properties": {"a": below, "b": below}}
    deref = Dereferencer(doc({}, components={"schemas": schemas}))
    inlined = deref.schema({"$ref": "#/components/schemas/S39"})
    assert len(str(inlined)) < 2_000_000


def test_openapi_30_nullable_becomes_a_null_type() -> None:
    document = {"openapi": "3.0.3", "paths": {}}
    assert Dereferencer(document).schema({"type": "string", "nullable": True}) == {"type": ["string", "null"]}


PETS = doc(
    {
        "/pets/{id}": {
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {
                "operationId": "get pet!",
                "summary": "Get",
                "tags": ["read"],
                "parameters": [
                    {"name": "id", "in": "query", "schema": {"type": "integer"}},
                    {"name": "X-Tag", "in": "header", "required": True, "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}
                },
            },
            "put": {
                "tags": ["write"],
                "security": [{"basic": []}],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}},
                "responses": {"204": {"description": "done"}},
            },
        },
        "/../escape": {"get": {"operationId": "escape", "responses": {}}},
        "/a%2fb": {"get": {"operationId": "encoded", "responses": {}}},
    },
    security=[{"key": []}],
    components={
        "securitySchemes": {
            "key": {"type": "apiKey", "in": "query", "name": "api_key"},
            "basic": {"type": "http", "scheme": "basic"},
            "oauth": {"type": "oauth2", "flows": {}},
        }
    },
)


def test_operations_become_tools_with_names_schemas_and_unsafe_paths_left_out() -> None:
    operations = {op.tool: op for op in read_operations(PETS, KEEP_ALL)}
    assert set(operations) == {"get_pet", "put_pets_id"}
    get = operations["get_pet"].definition
    assert get["description"] == "Get" and get["outputSchema"] == {"type": "object"}
    assert set(get["inputSchema"]["properties"]) == {"id", "query_id", "X-Tag"}
    assert get["inputSchema"]["required"] == ["id", "X-Tag"]
    put = operations["put_pets_id"].definition
    assert put["description"] == "PUT /pets/{id}" and put["inputSchema"]["required"] == ["id", "body"]


def test_include_and_exclude_select_by_tag_and_path_prefix() -> None:
    assert [op.tool for op in read_operations(PETS, Selection({"tags": ["write"]}, {}))] == ["put_pets_id"]
    assert [op.tool for op in read_operations(PETS, Selection({}, {"paths": ["/pets/*"]}))] == []
    assert [op.tool for op in read_operations(PETS, Selection({"paths": ["/pets/{id}"]}, {"tags": ["read"]}))] == [
        "put_pets_id"
    ]


def test_a_call_encodes_path_values_and_applies_the_operation_credentials() -> None:
    operations = {op.tool: op for op in read_operations(PETS, KEEP_ALL)}
    schemes = security_schemes(PETS)
    assert set(schemes) == {"key", "basic"}  # OAuth is not applied by toolmesh
    credentials = {"key": "k1", "basic": "ann:pw"}
    get = build_call(
        operations["get_pet"], {"id": "../x", "query_id": 3, "X-Tag": "t"}, "https://a.example/v1", schemes, credentials
    )
    assert get.url == "https://a.example/v1/pets/..%2Fx"
    assert get.params == [("id", "3"), ("api_key", "k1")] and get.headers == {"X-Tag": "t"}
    put = build_call(
        operations["put_pets_id"], {"id": "..", "body": {"a": 1}}, "https://a.example/v1/", schemes, credentials
    )
    assert put.url == "https://a.example/v1/pets/%2E%2E" and put.body == {"a": 1} and put.has_body
    assert put.headers["Authorization"] == "Basic " + base64.b64encode(b"ann:pw").decode()
    with pytest.raises(ArgumentProblem, match="missing required argument 'X-Tag'"):
        build_call(operations["get_pet"], {"id": "1"}, "https://a.example", schemes, credentials)
    with pytest.raises(ArgumentProblem, match="missing required argument 'body'"):
        build_call(operations["put_pets_id"], {"id": "1"}, "https://a.example", schemes, credentials)


def test_the_base_url_comes_from_config_or_the_document_relative_to_it() -> None:
    document = doc({}, servers=[{"url": "/{v}", "variables": {"v": {"default": "v2"}}}])
    assert api_base(document, None, "https://a.example/spec/o.json", credentialed=True) == "https://a.example/v2"
    assert (
        api_base(document, "https://b.example/api/", "https://a.example/o.json", credentialed=True)
        == "https://b.example/api"
    )
    with pytest.raises(DocumentProblem, match="egress policy"):
        api_base(
            doc({}, servers=[{"url": "//169.254.169.254/x"}]), None, "https://a.example/o.json", credentialed=False
        )
    with pytest.raises(DocumentProblem, match="no absolute server URL"):
        api_base(doc({}), None, None, credentialed=False)


def test_a_document_of_countless_empty_operations_is_read_up_to_the_bound() -> None:
    methods = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
    paths = {f"/{i:x}": {method: {} for method in methods} for i in range(MAX_OPERATIONS // 4)}
    operations = read_operations(doc(paths), Selection({}, {}))
    assert len(operations) == MAX_OPERATIONS
    assert operations[-1].tool == f"trace_{MAX_OPERATIONS // 8 - 1:x}"


def test_documents_are_json_or_yaml_of_openapi_3() -> None:
    assert parse_document(b"openapi: 3.0.1\npaths: {}\n")["openapi"] == "3.0.1"
    with pytest.raises(DocumentProblem, match=r"only OpenAPI 3\.0 and 3\.1"):
        parse_document(b'{"swagger": "2.0"}')
    with pytest.raises(DocumentProblem, match="neither JSON nor YAML"):
        parse_document(b"{: [")


def test_header_parameters_cannot_set_framing_or_security_headers_or_inject_lines() -> None:
    headers = ["Host", "Content-Length", "Transfer-Encoding", "Authorization", "Accept", "Content-Type", "bad name"]
    parameters = [{"name": name, "in": "header", "schema": {"type": "string"}} for name in [*headers, "X-Trace"]]
    document = doc({"/a": {"get": {"operationId": "a", "parameters": parameters, "responses": {}}}})
    (operation,) = read_operations(document, KEEP_ALL)
    assert set(operation.definition["inputSchema"]["properties"]) == {"X-Trace"}
    with pytest.raises(
        ArgumentProblem, match="argument 'X-Trace': the value of 'X-Trace' contains a control character"
    ):
        build_call(operation, {"X-Trace": "t\r\nX-Injected: 1"}, "https://a.example", {}, {})
