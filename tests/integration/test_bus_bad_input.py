"""A request on a server's bus subject that its owner cannot parse is answered with VALIDATION_ERROR,
and the owner keeps serving the server: any sender on the bus may send one (tool arguments nested
deeper than the parser's limit, a field of the wrong type, no JSON at all), and it used to fail the
owner's task without a reply, so the caller waited for its whole timeout."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS

from tests.connected_peer import running_with_peer
from tests.harness import System
from toolmesh.contracts.rpc import CallToolRpc
from toolmesh.platform.bus import verbs

pytestmark = pytest.mark.integration
ANSWER_WITHIN = 20.0
"""Seconds a caller waits for the owner's reply: far below the call timeouts sent here (a refusal is
answered at once; only a request left unanswered reaches it)."""
CALL_TIMEOUT = 600.0


def nested(depth: int) -> object:
    """A JSON value ``depth`` levels deep."""
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


MALFORMED = {
    "arguments nested 300 deep": json.dumps(
        {"tool": "echo", "arguments": {"text": nested(300)}, "timeout_seconds": CALL_TIMEOUT}
    ).encode(),
    "fields of the wrong type": json.dumps({"tool": ["echo"], "arguments": "x", "timeout_seconds": "soon"}).encode(),
    "not JSON": b"\xff{not json",
}


@pytest.fixture
async def demo(nats_url: str, database_url: str) -> AsyncIterator[tuple[System, str]]:
    """A toolmesh with the demo peer connected; its server id."""
    async with running_with_peer(nats_url, database_url, "demo") as running:
        yield running


@pytest.fixture
async def sender(nats_url: str) -> AsyncIterator[NATS]:
    """Another client of the bus (not the owner's connection: its requests travel over NATS)."""
    connection = await nats.connect(nats_url)
    yield connection
    await connection.close()


@pytest.mark.parametrize("payload", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_a_call_the_owner_cannot_parse_is_a_validation_error_and_the_server_keeps_serving(
    demo: tuple[System, str], sender: NATS, payload: bytes
) -> None:
    _, server_id = demo
    subject = verbs.CALL.subject(server_id)
    refused = json.loads((await sender.request(subject, payload, timeout=ANSWER_WITHIN)).data)
    assert refused["ok"] is False, refused
    assert refused["error"]["error_code"] == "VALIDATION_ERROR", refused
    assert refused["error"]["context"]["errors"], refused  # names what was wrong

    valid = CallToolRpc(tool="echo", arguments={"text": "still here"}, timeout_seconds=CALL_TIMEOUT)
    served = json.loads((await sender.request(subject, valid.model_dump_json().encode(), timeout=ANSWER_WITHIN)).data)
    assert served["ok"] is True, served
    assert "still here" in json.dumps(served["result"]["content"]), served


async def test_other_verbs_refuse_a_body_of_the_wrong_shape(demo: tuple[System, str], sender: NATS) -> None:
    _, server_id = demo
    for verb in ("ping", "request", "cancel", "health", "disconnect"):
        reply = await sender.request(verbs.RPC.subject(server_id, verb), b"[1, 2]", timeout=ANSWER_WITHIN)
        body = json.loads(reply.data)
        assert body["ok"] is False and body["error"]["error_code"] == "VALIDATION_ERROR", (verb, body)
