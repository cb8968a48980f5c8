"""A hostile 2026-07-28 upstream (``tests/peers/hostile_stateless.py``) against ``StatelessHttp``:
whatever it answers, a request ends in ``UpstreamError`` (which the session-worker turns into an
error reply), never in another exception that leaves the gateway waiting for a reply until its own
timeout."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp.shared.inbound import decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tests.peers.launch import free_port, running_process
from toolmesh.egress.policy import EgressPolicy
from toolmesh_session_worker.upstream.errors import UpstreamError
from toolmesh_session_worker.upstream.stateless import StatelessHttp, own_envelope
from toolmesh_session_worker.upstream.transports import session_http_client

pytestmark = pytest.mark.integration
HOSTILE = Path(__file__).parents[1] / "peers" / "hostile_stateless.py"
TIMEOUT = 20.0


@asynccontextmanager
async def hostile() -> AsyncIterator[StatelessHttp]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with running_process([sys.executable, str(HOSTILE), "--port", str(port)], port=port):
        async with session_http_client({}, None, upstream=url, egress=EgressPolicy(private=True)) as client:
            yield StatelessHttp("hostile", url, client, {"name": "toolmesh", "version": "test"})


class Heard:
    """The notifications a request hands its session (the session routes them as the handshake era's)."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []

    async def __call__(self, notification: mcp_types.ServerNotification) -> None:
        self.notifications.append(notification.model_dump(by_alias=True, mode="json", exclude_none=True))


async def _ignore(progress: float, total: float | None, message: str | None) -> None:
    """A progress sink."""


async def test_the_peer_answers_a_plain_call() -> None:
    """The control: the same peer and client complete an ordinary call."""
    async with hostile() as upstream:
        assert await upstream.discover(TIMEOUT) == MODERN_PROTOCOL_VERSIONS
        envelope = own_envelope(MODERN_PROTOCOL_VERSIONS[-1])
        result = await upstream.request("tools/call", {"name": "ok"}, envelope, timeout=TIMEOUT)
        assert result["content"][0]["text"] == "ok"


async def test_an_answer_nested_past_the_recursion_limit_is_an_upstream_error() -> None:
    async with hostile() as upstream:
        envelope = own_envelope(MODERN_PROTOCOL_VERSIONS[-1])
        with anyio.fail_after(TIMEOUT), pytest.raises(UpstreamError, match="invalid answer"):
            await upstream.request("tools/call", {"name": "deep"}, envelope, timeout=TIMEOUT)


async def test_a_progress_no_float_holds_is_dropped_and_the_call_completes() -> None:
    async with hostile() as upstream:
        envelope = own_envelope(MODERN_PROTOCOL_VERSIONS[-1])
        with anyio.fail_after(TIMEOUT):
            result = await upstream.request(
                "tools/call", {"name": "huge-progress"}, envelope, timeout=TIMEOUT, progress=_ignore
            )
        assert result["content"][0]["text"] == "ok"


async def test_only_valid_server_notifications_reach_the_session() -> None:
    """Notifications on a request's stream are the handshake era's: an unknown method, a malformed
    log message or a server → client request (which 2026-07-28 has none of on a stream) is dropped; a
    list change reaches the session (which rediscovers), not the client as it is."""
    heard = Heard()
    async with hostile() as upstream:
        envelope = own_envelope(MODERN_PROTOCOL_VERSIONS[-1])
        with anyio.fail_after(TIMEOUT):
            result = await upstream.request("tools/call", {"name": "chatter"}, envelope, timeout=TIMEOUT, notify=heard)
        assert result["content"][0]["text"] == "ok"
    assert heard.notifications == [
        {"method": "notifications/tools/list_changed"},
        {"method": "notifications/message", "params": {"level": "info", "data": "valid"}},
    ]


async def test_a_tool_name_with_a_line_break_travels_encoded_in_one_header() -> None:
    """``Mcp-Name`` mirrors the body's name; CR/LF in it cannot start a header of its own."""
    name = "echo\r\nX-Evil: 1"
    async with hostile() as upstream:
        envelope = own_envelope(MODERN_PROTOCOL_VERSIONS[-1])
        result = await upstream.request("tools/call", {"name": name}, envelope, timeout=TIMEOUT)
    assert result["headers"]["x-evil"] is None
    assert decode_header_value(result["headers"]["mcp-name"]) == name
