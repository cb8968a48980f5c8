"""A message on a client session's bus subject that the gateway cannot take is answered with a
JSON-RPC error the upstream understands (a body ``ClientRequest`` refuses: invalid params; a verb
the client family does not have: method not found); it used to fail the gateway's task without a
reply, so the session-worker waited for its whole timeout."""

from __future__ import annotations

from collections.abc import AsyncIterator

import mcp_types
import nats
import pytest
from nats.aio.client import Client as NATS

from toolmesh.contracts.clients import client_id
from toolmesh.contracts.rpc import RpcReply
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.nats_bus import NatsBus
from toolmesh_gateway.front_door.client_links import ClientLinks
from toolmesh_gateway.front_door.session_channels import SessionChannels

pytestmark = pytest.mark.integration
ANSWER_WITHIN = 10.0
CLIENT = client_id("replica1", "session1")


@pytest.fixture
async def sender(nats_url: str) -> AsyncIterator[NATS]:
    """A session-worker's end of the bus, with a gateway replica's ``ClientLinks`` listening."""
    gateway = await nats.connect(nats_url)
    links = ClientLinks(NatsBus(gateway), "replica1", SessionChannels())
    await links.start()
    await gateway.flush()
    connection = await nats.connect(nats_url)
    yield connection
    await connection.close()
    await links.close()
    await gateway.close()


async def _error(sender: NATS, subject: str, payload: bytes) -> dict[str, object]:
    reply = RpcReply.model_validate_json((await sender.request(subject, payload, timeout=ANSWER_WITHIN)).data)
    assert not reply.ok and reply.error is not None, reply
    return reply.error


@pytest.mark.parametrize("payload", [b"[1, 2]", b'{"method": "roots/list"}', b"\xff{not json"])
async def test_a_client_request_the_gateway_cannot_parse_is_invalid_params(sender: NATS, payload: bytes) -> None:
    error = await _error(sender, verbs.CLIENT_REQUEST.subject(CLIENT), payload)
    assert error["code"] == mcp_types.INVALID_PARAMS, error


async def test_a_verb_the_client_family_lacks_is_method_not_found(sender: NATS) -> None:
    error = await _error(sender, verbs.CLIENT.subject(CLIENT, "shout"), b"{}")
    assert error["code"] == mcp_types.METHOD_NOT_FOUND, error
