"""Headers a registration may not configure (attack of issue 23: ``Host``, ``Transfer-Encoding``,
``Content-Length`` and ``Connection`` in ``connection_config.headers`` reached the upstream)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolmesh.contracts.servers import RegisterServerRequest

pytestmark = pytest.mark.unit


def _register(transport: str, headers: dict[str, str]) -> RegisterServerRequest:
    key = "base_url" if transport == "HTTP" else "url"
    config = {key: "https://upstream.example/mcp", "headers": headers}
    return RegisterServerRequest.model_validate(
        {"name": "up", "transport_type": transport, "connection_config": config}
    )


@pytest.mark.parametrize("transport", ["HTTP", "SSE", "REST"])
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


@pytest.mark.parametrize("name", ["X-Injected: 1\r\nHost", "bad header", "", "caf\u00e9"])
def test_a_header_name_that_is_not_a_token_is_refused(name: str) -> None:
    with pytest.raises(ValidationError) as raised:
        _register("HTTP", {name: "x"})
    assert raised.value.errors()[0]["loc"] == ("connection_config", "headers")


def test_ordinary_headers_are_accepted() -> None:
    request = _register("HTTP", {"Authorization": "Bearer t", "X-Api-Key": "k", "Accept-Language": "en"})
    assert request.connection_config["headers"]["X-Api-Key"] == "k"
