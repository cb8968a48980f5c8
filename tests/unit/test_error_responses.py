"""Errors raised beside FastAPI (the MCP routes) get the contract's answers while nothing was sent yet."""

from __future__ import annotations

import httpx
import nats.errors
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from toolmesh.errors import BackendUnavailable
from toolmesh_gateway.errors import ErrorResponses


def raising(exc: Exception, *, after_start: bool = False) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if after_start:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        raise exc

    return app


async def call(exc: Exception, *, after_start: bool = False) -> httpx.Response:
    transport = httpx.ASGITransport(app=ErrorResponses(raising(exc, after_start=after_start)))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        return await client.delete("/mcp")


async def test_a_toolmesh_error_gets_its_status_and_body() -> None:
    exc = BackendUnavailable("the session store is unreachable")
    answered = await call(exc)
    assert (answered.status_code, answered.json()) == (503, exc.body())


async def test_nats_unreachable_is_backend_unavailable() -> None:
    answered = await call(nats.errors.NoServersError())
    assert answered.status_code == 503 and answered.json()["error_code"] == "BACKEND_UNAVAILABLE"


async def test_an_error_after_the_response_started_is_not_answered_twice() -> None:
    with pytest.raises(BackendUnavailable):
        await call(BackendUnavailable("late"), after_start=True)
