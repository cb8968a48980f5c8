"""Which security scheme an OPENAPI server's OAuth grant is for, and which calls carry its token."""

from __future__ import annotations

from typing import Any

import pytest

from toolmesh.contracts.connection_config import TransportType, config_problems
from toolmesh.contracts.openapi_oauth import NoOAuthScheme, oauth_scheme, required_scopes
from toolmesh_session_worker.upstream.openapi.operations import Selection, read_operations
from toolmesh_session_worker.upstream.openapi.requests import build_call, security_schemes

pytestmark = pytest.mark.unit
CODE = {"authorizationCode": {"authorizationUrl": "https://as.example/a", "tokenUrl": "https://as.example/t"}}


def doc(schemes: dict[str, Any], paths: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": paths or {},
        "components": {"securitySchemes": schemes},
        **extra,
    }


def test_the_scheme_is_the_named_one_else_the_first_authorizable_by_name() -> None:
    schemes = {
        "zeta": {"type": "openIdConnect", "openIdConnectUrl": "https://as.example/.well-known/openid-configuration"},
        "key": {"type": "apiKey", "in": "header", "name": "K"},
        "beta": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "https://as.example/t"}}},
        "gamma": {"type": "oauth2", "flows": CODE},
    }
    assert oauth_scheme(doc(schemes), None)[0] == "gamma"  # beta has no authorizationCode flow
    assert oauth_scheme(doc(dict(reversed(schemes.items()))), None)[0] == "gamma"  # whatever the key order
    assert oauth_scheme(doc(schemes), "zeta")[0] == "zeta"
    for named in ("beta", "key", "missing"):
        with pytest.raises(NoOAuthScheme, match=r"auth\.scheme"):
            oauth_scheme(doc(schemes), named)
    with pytest.raises(NoOAuthScheme, match="declares no oauth2"):
        oauth_scheme(doc({"key": schemes["key"]}), None)


def test_the_scopes_asked_are_those_the_requirements_name_for_the_scheme() -> None:
    paths = {"/a": {"get": {"security": [{"o": ["write", "read"]}, {"k": []}]}, "parameters": []}}
    document = doc({"o": {"type": "oauth2", "flows": CODE}}, paths, security=[{"o": ["read"]}, {"other": ["x"]}])
    assert required_scopes(document, "o") == ["read", "write"]


def test_only_operations_whose_requirement_names_the_scheme_carry_the_token() -> None:
    schemes = {"o": {"type": "oauth2", "flows": CODE}, "k": {"type": "apiKey", "in": "header", "name": "K"}}
    paths = {
        "/guarded": {"get": {"operationId": "guarded", "responses": {}}},
        "/open": {"get": {"operationId": "open", "security": [], "responses": {}}},
        "/keyed": {"get": {"operationId": "keyed", "security": [{"o": []}, {"k": []}], "responses": {}}},
        "/both": {"get": {"operationId": "both", "security": [{"o": [], "k": []}], "responses": {}}},
    }
    document = doc(schemes, paths, security=[{"o": ["read"]}])
    ops = {op.tool: op for op in read_operations(document, Selection({}, {}))}
    known = security_schemes(document)
    base = "https://api.example"
    assert build_call(ops["guarded"], {}, base, known, {}, "o").bearer is True
    assert build_call(ops["guarded"], {}, base, known, {}, None).bearer is False  # no grant configured
    assert build_call(ops["open"], {}, base, known, {}, "o").bearer is False
    keyed = build_call(ops["keyed"], {}, base, known, {"k": "s3cret"}, "o")  # another credential applies
    assert keyed.bearer is False and keyed.headers["K"] == "s3cret"
    assert build_call(ops["keyed"], {}, base, known, {}, "o").bearer is True
    both = build_call(ops["both"], {}, base, known, {"k": "s3cret"}, "o")
    assert both.bearer is True and both.headers["K"] == "s3cret"
    assert build_call(ops["both"], {}, base, known, {}, "o").bearer is False  # the key is missing


def test_auth_is_taken_for_openapi_servers_and_its_scheme_for_them_only() -> None:
    spec = {"spec_url": "https://api.example/openapi.json"}
    assert config_problems(TransportType.OPENAPI, {**spec, "auth": {"mode": "oauth", "scheme": "o"}}) == []
    rest = {"url": "https://api.example/tools", "auth": {"mode": "oauth", "scheme": "o"}}
    assert [field for field, _ in config_problems(TransportType.REST, rest)] == ["auth"]
