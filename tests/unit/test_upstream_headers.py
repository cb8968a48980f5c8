"""Headers a registration may not configure (attack of issue 23: ``Host``, ``Transfer-Encoding``,
``Content-Length`` and ``Connection`` in ``connection_config.headers`` reached the upstream)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolmesh.contracts.servers import RegisterServerRequest

pytestmark = pytest.mark.unit


def _register(transport: str, headers: dict[str, str]) -> RegisterServerRequest:
    key = {"HTTP": "base_url", "OPENAPI": "spec_url"}.get(transport, "url")
    config = {key: "https://upstream.example/mcp", "headers": headers}
    return RegisterServerRequest.model_validate(
        {"name": "up", "transport_type": transport, "connection_config": config}
    )


@pytest.mark.parametrize("transport", ["HTTP", "SSE", "REST", "OPENAPI"])
@pytest.mark.parametrize(
    "name",
    ["Host", "transfer-encoding", "Content-Length", "CONNECTION", "Keep-Alive", "Upgrade", "TE", "Mcp-Session-Id"],
)
def test_a_hop_by_hop_or_framing_header_is_refused_naming_the_field(transport: str, name: str) -> None:
    with pytest.raises(ValidationError) as raised:
        _register(transport, {"Authorization": "Bearer t", name: "x"})
    (error,) = raised.value.errors()
    assert error["loc"] == ("connection_config", "headers")
    assert repr(name) in error["msg"]


@pytest.mark.parametrize(
    "name", ["X-Injected: 1\r\nHost", "bad header", "", "caf\u00e9", "Authorization: Bearer nameSecret9"]
)
def test_a_header_name_that_is_not_a_token_is_refused_without_quoting_it(name: str) -> None:
    with pytest.raises(ValidationError) as raised:
        _register("HTTP", {"Accept": "x", name: "x"})
    (error,) = raised.value.errors()
    assert error["loc"] == ("connection_config", "headers")
    assert "header name number 2" in error["msg"]
    assert not name or name not in str(raised.value)


@pytest.mark.parametrize("transport", ["HTTP", "SSE", "REST", "OPENAPI"])
@pytest.mark.parametrize(
    "value",
    [
        "plainLiteralSecret77\r\n",
        "Bearer crlfSECRET42\r\nX-Inj: 1",
        "lfOnlySecret42\nX",
        "crOnlySecret42\rX",
        "nulSecret42\x00",
        "vtSecret42\x0bX",
        "escSecret42\x1b[0m",
        "delSecret42\x7f",
        " leadingSecret42",
        "trailingSecret42\t",
        "s\u00e9cretValue42",
    ],
)
def test_a_header_value_that_is_no_http_field_is_refused_naming_the_header_not_the_value(
    transport: str, value: str
) -> None:
    """Issue 23: a value with CR LF was accepted, and the HTTP client's error quoting it reached the log."""
    with pytest.raises(ValidationError) as raised:
        _register(transport, {"X-Api-Key": value})
    errors = raised.value.errors()
    assert {error["loc"] for error in errors} == {("connection_config", "headers")}
    assert "'X-Api-Key'" in errors[0]["msg"]
    shown = str(raised.value) + repr(errors)
    assert not any(part in shown for part in (value, repr(value)[1:-1], value.strip()[:10]))


def test_a_refused_header_is_echoed_masked() -> None:
    """The 422 body echoes each error's input: for headers, only ``***``."""
    with pytest.raises(ValidationError) as raised:
        _register("HTTP", {"Authorization": "Bearer okSecret42", "X-Api-Key": "bad\r\n"})
    assert [error["input"] for error in raised.value.errors()] == ["***"]


def test_tabs_and_spaces_inside_a_value_are_allowed() -> None:
    request = _register("SSE", {"X-Forwarded": "a, b\tc", "Authorization": "Bearer ${TOKEN}", "X-Empty": ""})
    assert request.connection_config["headers"]["X-Forwarded"] == "a, b\tc"


def test_ordinary_headers_are_accepted() -> None:
    request = _register("HTTP", {"Authorization": "Bearer t", "X-Api-Key": "k", "Accept-Language": "en"})
    assert request.connection_config["headers"]["X-Api-Key"] == "k"
