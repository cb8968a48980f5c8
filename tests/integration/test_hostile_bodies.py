"""Hostile input is answered inside its contract, and never stalls the gateway: a code-mode pack call
whose arguments are huge or not JSON is refused in the snippet; a lone surrogate or a body that is
not JSON text (invalid UTF-8, an integer too long to read) is a 4xx with the contract's error body,
on REST and on the NATS API; a header value with a lone surrogate is refused at registration."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import nats
import pytest

from tests.connected_peer import running_with_peer
from tests.harness import ADMIN_TOKEN, System
from tests.mcp_client import mcp_session, text_of

pytestmark = pytest.mark.integration
LONE = "\ud800"
"""A lone surrogate: a str Python's json module reads from ``"\\ud800"``, which has no UTF-8 form."""


@pytest.fixture
async def demo(nats_url: str, database_url: str) -> AsyncIterator[System]:
    """A toolmesh with the demo peer connected as ``raw3``."""
    async with running_with_peer(nats_url, database_url, "raw3") as (running, _):
        yield running


def escaped(body: Any) -> bytes:
    """``body`` as JSON text with non-ASCII (and lone surrogates) escaped, as a hostile client sends it."""
    return json.dumps(body, ensure_ascii=True).encode()


async def post_raw(system: System, path: str, data: bytes, **headers: str) -> httpx.Response:
    return await system.api.post(path, content=data, headers={"content-type": "application/json", **headers})


def assert_contract_4xx(response: httpx.Response) -> dict[str, Any]:
    """A 4xx whose body is the contract's error body with ``VALIDATION_ERROR``."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    body: dict[str, Any] = response.json()
    assert body["error_code"] == "VALIDATION_ERROR" and body["detail"], body
    return body


async def test_huge_pack_arguments_are_refused_in_the_snippet_and_the_gateway_keeps_answering(demo: System) -> None:
    """A snippet passing three million values to a pack call is refused with a VALIDATION_ERROR it can
    catch, before the gateway converts them all; /livez answers while the run is under way; returned as
    the run's result, the list is refused by the same budget."""
    snippet = (
        "x = []\nfor i in range(3 * 10**6):\n    x.append(raw3)\n"
        "r = 'sent'\ntry:\n    raw3.echo(text=x)\nexcept ValueError as e:\n    r = str(e)\nr"
    )
    async with mcp_session(demo, mode="search") as session:
        run = asyncio.create_task(session.call_tool("run", {"code": snippet}))
        answered_during_run = 0
        while not run.done():
            live = await demo.api.get("/livez")
            assert live.status_code == 200, live.text
            answered_during_run += not run.done()
        result = await run
        body = json.loads(text_of(result))
        assert body["ok"] is True, body
        assert body["result"].startswith("VALIDATION_ERROR: raw3.echo(): text"), body
        assert "100000 values" in body["result"], body
        assert body["tool_calls"] == 0, body
        assert answered_during_run > 0
        after = await session.call_tool("run", {"code": "raw3.echo(text='still here')"})
        assert json.loads(text_of(after))["ok"] is True, text_of(after)
        # the same list as the run's result: refused by the same budget, not converted value by value
        returned = await session.call_tool("run", {"code": "x = [raw3] * (3 * 10**6)\nx"})
        refused = json.loads(text_of(returned))
        assert refused["ok"] is False and "too large to return" in refused["error"], refused


@pytest.mark.parametrize(
    ("argument", "why"),
    [("raw3", "type ClassInstance"), ('b"\\xff"', "type bytes"), ("{1, 2}", "type set"), ("10**5000", "too long")],
)
async def test_a_pack_call_with_a_non_json_argument_raises_a_catchable_validation_error(
    demo: System, argument: str, why: str
) -> None:
    """A pack handle, bytes, a set or an unwritable integer as an argument: an exception in the snippet
    (it was a JSON-RPC error with code 0, failing the whole run)."""
    snippet = f"r = 'sent'\ntry:\n    raw3.echo(text={argument})\nexcept ValueError as e:\n    r = str(e)\nr"
    async with mcp_session(demo, mode="search") as session:
        result = await session.call_tool("run", {"code": snippet})
    body = json.loads(text_of(result))
    assert body["ok"] is True, body
    assert body["result"].startswith("VALIDATION_ERROR: raw3.echo(): text"), body
    assert why in body["result"] or "has no JSON form" in body["result"], body


@pytest.mark.parametrize(
    ("path", "body", "headers"),
    [
        ("/api/v1/tools/call", {"name": "raw3.echo", "arguments": {"text": LONE}}, {}),
        ("/api/v1/tools/call", {"name": "raw3.echo", "arguments": {"text": LONE}}, {"Idempotency-Key": "lone-1"}),
        ("/api/v1/tools/call", {"name": f"raw3.echo{LONE}", "arguments": {}}, {}),
        ("/api/v1/tools/call", {"name": f"raw3.echo{LONE}", "arguments": {}}, {"Idempotency-Key": "lone-2"}),
        ("/api/v1/search", {"query": f"echo {LONE}"}, {}),
        ("/api/v1/resources/read", {"uri": f"file:///{LONE}"}, {}),
        ("/api/v1/auth/keys", {"name": f"k{LONE}", "role": "user"}, {}),
        (
            "/api/v1/aggregator/servers",
            {"name": "lone", "transport_type": "HTTP", "connection_config": {"base_url": "http://127.0.0.1:9/mcp"}}
            | {"description": LONE},
            {},
        ),
        ("/api/v1/endpoints", {"name": "lone-ep", "description": LONE}, {}),
    ],
)
async def test_a_lone_surrogate_in_a_body_is_a_validation_error_not_a_500(
    demo: System, path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    response = await post_raw(demo, path, escaped(body), **headers)
    assert_contract_4xx(response)


async def listed_names(system: System) -> dict[str, str]:
    servers = (await system.api.get("/api/v1/aggregator/servers")).json()["servers"]
    return {s["name"]: s["id"] for s in servers}


async def nats_ask(system: System, operation: str, payload: bytes) -> dict[str, Any]:
    nc = await nats.connect(system.settings.nats_url)
    try:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        msg = await nc.request(f"toolmesh.api.v1.{operation}", payload, timeout=30, headers=headers)
    finally:
        await nc.close()
    reply: dict[str, Any] = json.loads(msg.data)
    return reply


async def test_a_lone_surrogate_in_tools_approve_is_a_validation_error(demo: System) -> None:
    server_id = (await listed_names(demo))["raw3"]
    response = await post_raw(
        demo, f"/api/v1/aggregator/servers/{server_id}/tools/approve", escaped({"tools": [f"echo{LONE}"]})
    )
    assert_contract_4xx(response)


async def test_a_lone_surrogate_in_a_header_value_is_refused_at_registration(demo: System) -> None:
    """It was accepted (201) and every connect failed with UnicodeEncodeError."""
    config = {"base_url": "http://127.0.0.1:9/mcp", "headers": {"X-Token": f"a{LONE}"}}
    body = {"name": "lone-header", "transport_type": "HTTP", "connection_config": config}
    response = await post_raw(demo, "/api/v1/aggregator/servers", escaped(body))
    assert response.status_code == 422, response.text
    assert_contract_4xx(response)
    reply = await nats_ask(demo, "servers.register", escaped(body))
    assert reply["ok"] is False and reply["error"]["error_code"] == "VALIDATION_ERROR", reply
    assert "headers" in json.dumps(reply["error"]), reply
    assert "lone-header" not in await listed_names(demo)


async def test_a_lone_surrogate_over_the_nats_api_is_a_validation_error(demo: System) -> None:
    """tools.call answered ROUTING_FAILED "Internal error in tools.call"."""
    reply = await nats_ask(demo, "tools.call", escaped({"name": "raw3.echo", "arguments": {"text": LONE}}))
    assert reply["ok"] is False and reply["error"]["error_code"] == "VALIDATION_ERROR", reply


@pytest.mark.parametrize(
    "data",
    [
        b'{"name": "raw3.echo", "arguments": {"text": "\xff\xfe"}}',
        b'{"name": "raw3.echo", "arguments": {"n": ' + b"9" * 5000 + b"}}",
    ],
    ids=["invalid-utf8", "5000-digit-integer"],
)
@pytest.mark.parametrize("path", ["/api/v1/tools/call", "/api/v1/search", "/api/v1/auth/keys"])
async def test_a_body_that_is_not_json_text_gets_the_contract_error_body(demo: System, path: str, data: bytes) -> None:
    response = await post_raw(demo, path, data)
    assert response.status_code == 422, response.text
    assert_contract_4xx(response)
