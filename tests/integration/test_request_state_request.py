"""A 2026-07-28 ``requestState`` belongs to the request that received it, which its retry repeats.

Attack: the starter of ``demo__ask`` sent its retry as ``demo__echo`` (or with other arguments),
and got ask's result: nothing checked that the retry was the same request. Now a retry naming
another tool or carrying other arguments gets ``-32602`` saying the state belongs to another
request, the parked call waits on, and the honest retry still gets the result.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.harness import ADMIN_TOKEN, System, running_system
from tests.mcp_client import mcp_url, sample_by_echo, text_of
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    """The demo peer (its ``ask`` tool samples the client) as server ``demo``."""
    async with running_system(nats_url, database_url) as system, launch_peer("http") as peer:
        created = await system.register("demo", peer.transport_type, peer.config)
        await system.wait_connected(created["id"])
        yield system


async def test_a_request_state_retried_with_another_tool_or_arguments_is_refused(system: System) -> None:
    question = {"question": "plan of A"}
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60) as http,
        Client(
            streamable_http_client(mcp_url(system), http_client=http), mode="auto", sampling_callback=sample_by_echo
        ) as client,
    ):
        assert client.session.protocol_version == "2026-07-28"
        asked = await client.session.call_tool("demo__ask", question, allow_input_required=True)
        assert isinstance(asked, mcp_types.InputRequiredResult) and asked.input_requests, asked
        (key,) = asked.input_requests
        answers: mcp_types.InputResponses = {
            key: mcp_types.CreateMessageResult(
                role="assistant", content=mcp_types.TextContent(type="text", text="A's answer"), model="test-model"
            )
        }
        for name, arguments in (("demo__echo", {"text": "plan of A"}), ("demo__ask", {"question": "other plan"})):
            with pytest.raises(MCPError) as refused:
                await client.session.call_tool(
                    name, arguments, input_responses=answers, request_state=asked.request_state
                )
            assert refused.value.code == mcp_types.INVALID_PARAMS, refused.value
            assert "another request" in refused.value.message

        honest = await client.session.call_tool(
            "demo__ask", question, input_responses=answers, request_state=asked.request_state
        )
    assert text_of(honest) == "model said: A's answer"
