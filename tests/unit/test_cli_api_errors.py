"""The CLI's calls through ``toolmesh.client``: every failure is one readable line, requests are well-formed."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from toolmesh.errors import LimitExceeded, ValidationFailed
from toolmesh_cli.client import ApiClient, Target
from toolmesh_cli.errors import ApiError, describe_api_error

pytestmark = pytest.mark.unit

TARGET = Target("http://toolmesh.test", "token", "TOOLMESH_ADMIN_TOKEN")


def test_a_refused_request_is_its_detail_and_code() -> None:
    assert describe_api_error(LimitExceeded("Too many servers in this namespace")) == (
        "Too many servers in this namespace (LIMIT_EXCEEDED)"
    )


def test_a_validation_failure_names_each_invalid_field() -> None:
    errors = [
        {"loc": ["body", "connection_config", "command"], "msg": "Field required"},
        {"loc": ["body", "name"], "msg": "String should have at most 100 characters"},
    ]
    told = describe_api_error(ValidationFailed("Request validation failed", {"errors": errors}))
    assert told == (
        "connection_config.command: Field required; name: String should have at most 100 characters (VALIDATION_ERROR)"
    )
    assert (
        describe_api_error(ValidationFailed("Header X-A is not valid")) == "Header X-A is not valid (VALIDATION_ERROR)"
    )


def failure(answer: Callable[[httpx.Request], httpx.Response], target: Target = TARGET) -> ApiError:
    """The ``ApiError`` of one ``servers show`` call against an API answering with ``answer``."""
    with ApiClient(target, transport=httpx.MockTransport(answer)) as api, pytest.raises(ApiError) as raised:
        api.server("s1")
    return raised.value


def test_error_bodies_become_one_line() -> None:
    spec = {"detail": "Server not found: s1", "error_code": "SERVER_NOT_FOUND", "context": {}}
    told = failure(lambda _: httpx.Response(404, json=spec))
    assert (str(told), told.status, told.error_code) == (
        "Server not found: s1 (SERVER_NOT_FOUND)",
        404,
        "SERVER_NOT_FOUND",
    )
    unprocessable = {"detail": [{"loc": ["body", "connection_config", "url"], "msg": "required", "type": "x"}]}
    told = failure(lambda _: httpx.Response(422, json=unprocessable))
    assert str(told) == "connection_config.url: required (VALIDATION_ERROR)"
    page = failure(lambda _: httpx.Response(502, text="Bad gateway\nmore"))
    assert str(page) == "HTTP 502: Bad gateway (BACKEND_UNAVAILABLE)"


def test_a_refused_token_says_where_it_came_from() -> None:
    refused = {"detail": "Invalid API key", "error_code": "UNAUTHORIZED"}
    told = failure(lambda _: httpx.Response(401, json=refused))
    assert str(told) == "Invalid API key (UNAUTHORIZED); admin token from TOOLMESH_ADMIN_TOKEN"


def test_no_token_sends_no_authorization() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(401, json={"detail": "Missing API key", "error_code": "UNAUTHORIZED"})

    failure(answer, Target(TARGET.url, None, "none"))
    assert "authorization" not in seen[0].headers


def test_an_unreachable_api_is_not_running_and_has_no_status() -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    told = failure(refused)
    assert (str(told), told.status) == ("toolmesh is not running at http://toolmesh.test", None)


def test_a_request_the_api_would_refuse_is_refused_before_sending() -> None:
    with ApiClient(TARGET, transport=httpx.MockTransport(lambda _: httpx.Response(500))) as api:
        with pytest.raises(ApiError, match=r"^limit: Input should be less than or equal to 100 \(VALIDATION_ERROR\)$"):
            api.search({"query": "x", "limit": 1000})


def test_a_filter_left_out_is_not_sent_as_an_empty_one() -> None:
    asked: list[httpx.URL] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url)
        return httpx.Response(200, json={"servers": [], "total": 0, "limit": 1000, "offset": 0})

    with ApiClient(TARGET, transport=httpx.MockTransport(answer)) as api:
        assert api.servers() == []
        assert api.servers(status="ERROR") == []
    assert "status" not in asked[0].params and asked[1].params["status"] == "ERROR"
