"""The standalone channel of a session: the registered connection's, or none that can send."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from mcp.server.connection import Connection
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError

from toolmesh_gateway.front_door.session_channels import NO_CHANNEL, SessionChannels


class Recording:
    """An outbound that keeps what was sent on it."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        self.sent.append(method)
        return {}

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        self.sent.append(method)


class Transport:
    """A session's transport: whether its standalone stream is open here, and what it was handed."""

    def __init__(self) -> None:
        self.streaming = False
        self.delivered: list[dict[str, Any]] = []

    async def deliver(self, message: dict[str, Any]) -> bool:
        self.delivered.append(message)
        return True


async def test_a_served_session_has_its_connections_channel_until_it_ends() -> None:
    channels, outbound = SessionChannels(), Recording()
    connection = Connection.for_loop(outbound, session_id="s1")
    transport = Transport()
    delivered = transport.delivered
    channels.add("s1", connection, transport)
    assert channels.connection("s1") is connection and channels.streaming("s1") is False
    transport.streaming = True
    assert channels.streaming("s1") is True and channels.streaming("s2") is False
    await channels.standalone("s1").send_raw_request("roots/list", None)
    assert outbound.sent == ["roots/list"]
    answer = {"jsonrpc": "2.0", "id": "tm-0123456789ab-1", "result": {}}
    assert await channels.deliver("s1", answer) is True and delivered == [answer]
    assert await channels.deliver("s2", answer) is False
    channels.remove("s1")
    assert channels.connection("s1") is None and channels.standalone("s1") is NO_CHANNEL
    assert await channels.deliver("s1", answer) is False and delivered == [answer]
    assert channels.streaming("s1") is False


async def test_a_request_without_a_session_here_cannot_reach_its_client_outside_the_request() -> None:
    channels = SessionChannels()
    for session in (None, "unknown"):
        channel = channels.standalone(session)
        with pytest.raises(NoBackChannelError):
            await channel.send_raw_request("sampling/createMessage", {})
        await channel.notify("notifications/message", {"level": "info", "data": "dropped"})
