"""Front-door guards as pure logic and small ASGI apps: rate limit, Origin/Host, body limit, strict bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolmesh.contracts.search import SearchRequest
from toolmesh.contracts.servers import DisconnectRequest, RegisterServerRequest
from toolmesh.errors import RateLimited
from toolmesh_gateway.body_limit import BodyLimit
from toolmesh_gateway.origin import OriginGuard, host_allowed, origin_allowed
from toolmesh_gateway.rate_limit import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_limit_allows_the_burst_then_refuses_with_the_wait() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=2.0, burst=3, clock=clock)
    for _ in range(3):
        limiter.check("alice")
    with pytest.raises(RateLimited) as raised:
        limiter.check("alice")
    assert raised.value.status == 429 and raised.value.error_code == "RATE_LIMITED"
    assert raised.value.headers() == {"Retry-After": "1"}
    limiter.check("bob")  # every principal has its own bucket
    clock.now += 0.5  # one token back at 2/s
    limiter.check("alice")
    with pytest.raises(RateLimited):
        limiter.check("alice")


def test_rate_limit_retry_after_rounds_the_wait_up() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=0.1, burst=1, clock=clock)
    limiter.check("slow")
    with pytest.raises(RateLimited) as raised:
        limiter.check("slow")
    assert raised.value.context == {"retry_after_seconds": 10}


def test_rate_limit_zero_disables_it() -> None:
    limiter = RateLimiter(rate=0, burst=1)
    for _ in range(1000):
        limiter.check("alice")


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://localhost:5173", True),
        ("http://127.0.0.1:8081", True),
        ("http://[::1]:3000", True),
        ("http://localhost", True),
        ("https://app.example.com", True),
        ("HTTPS://APP.EXAMPLE.COM/", True),
        ("http://evil.example", False),
        ("http://localhost.evil.example:80", False),
        ("https://app.example.com:8443", False),
        ("null", False),
    ],
)
def test_origins_match_exactly_or_by_any_port(origin: str, allowed: bool) -> None:
    patterns = ("http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*", "https://app.example.com")
    assert origin_allowed(origin, patterns) is allowed


def test_a_star_allows_every_origin() -> None:
    assert origin_allowed("https://anything.example", ["*"])


def test_hosts_of_a_loopback_gateway() -> None:
    assert all(host_allowed(h, ()) for h in ("127.0.0.1:8081", "localhost:8081", "[::1]:8081", "localhost", None))
    assert not host_allowed("rebound.example:8081", ())
    assert host_allowed("toolmesh.internal:8081", ("toolmesh.internal",))


async def _echo_length(request: Request) -> JSONResponse:
    return JSONResponse({"length": len(await request.body())})


def _client(app: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8081")  # type: ignore[arg-type]


@pytest.fixture
async def guarded() -> AsyncIterator[httpx.AsyncClient]:
    inner = Starlette(
        routes=[Route("/mcp", _echo_length, methods=["POST"]), Route("/api", _echo_length, methods=["POST"])]
    )
    app = BodyLimit(inner, max_bytes=1000, max_depth=64)
    app = OriginGuard(app, prefix="/mcp", allowed_origins=("http://localhost:*",), allowed_hosts=(), check_host=True)
    async with _client(app) as client:
        yield client


async def test_body_limit_refuses_declared_and_streamed_bodies_with_the_contract_body(
    guarded: httpx.AsyncClient,
) -> None:
    assert (await guarded.post("/api", content=b"x" * 1000)).json() == {"length": 1000}
    declared = await guarded.post("/api", content=b"x" * 1001)
    assert declared.status_code == 413
    assert declared.json() == {
        "detail": "Request body is larger than 1000 bytes",
        "error_code": "PAYLOAD_TOO_LARGE",
        "context": {"max_bytes": 1000},
    }

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it streams
        for _ in range(20):
            yield b"x" * 100

    streamed = await guarded.post("/mcp", content=chunks())
    assert streamed.status_code == 413 and streamed.json()["error_code"] == "PAYLOAD_TOO_LARGE"


async def test_origin_guard_covers_mcp_paths_only(guarded: httpx.AsyncClient) -> None:
    foreign = {"Origin": "http://evil.example"}
    refused = await guarded.post("/mcp", content=b"{}", headers=foreign)
    assert refused.status_code == 403
    assert refused.json() == {
        "detail": "Origin not allowed: http://evil.example",
        "error_code": "FORBIDDEN",
        "context": {"origin": "http://evil.example"},
    }
    assert (await guarded.post("/api", content=b"{}", headers=foreign)).status_code == 200
    assert (await guarded.post("/mcp", content=b"{}", headers={"Origin": "http://localhost:5173"})).status_code == 200
    assert (await guarded.post("/mcp", content=b"{}")).status_code == 200
    rebound = await guarded.post("/mcp", content=b"{}", headers={"Host": "rebound.example:8081"})
    assert rebound.status_code == 403 and rebound.json()["context"] == {"host": "rebound.example:8081"}


def test_typos_in_request_bodies_are_refused() -> None:
    with pytest.raises(ValidationError) as raised:
        SearchRequest.model_validate({"query": "x", "server_fliter": ["github"]})
    assert raised.value.errors()[0]["loc"] == ("server_fliter",)
    with pytest.raises(ValidationError):
        DisconnectRequest.model_validate({"froce": True})
    with pytest.raises(ValidationError) as raised:
        RegisterServerRequest.model_validate(
            {"name": "x", "transport_type": "HTTP", "connection_config": {"base_url": "https://h", "header": {}}}
        )
    assert raised.value.errors()[0]["loc"] == ("connection_config", "header")
    assert "known: base_url, headers" in raised.value.errors()[0]["msg"]
