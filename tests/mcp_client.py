"""An MCP client of the gateway's ``/mcp`` for tests: the SDK's Streamable HTTP client with a bearer token."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.streamable_http import streamable_http_client

from tests.harness import ADMIN_TOKEN, System


@dataclass
class Received:
    """Notifications the server sent on the session's standalone stream."""

    messages: list[Any] = field(default_factory=list)

    async def handle(self, message: IncomingMessage) -> None:
        self.messages.append(message)

    def tools_changed(self) -> int:
        return sum(isinstance(m, mcp_types.ToolListChangedNotification) for m in self.messages)


def mcp_url(system: System, mode: str | None = None) -> str:
    base = f"http://{system.settings.host}:{system.settings.port}/mcp"
    return f"{base}?mode={mode}" if mode else base


@contextlib.asynccontextmanager
async def mcp_session(
    system: System, *, mode: str | None = None, token: str = ADMIN_TOKEN, received: Received | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with the gateway."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(mcp_url(system, mode), http_client=http) as (read, write),
        ClientSession(read, write, message_handler=received.handle if received else None) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: mcp_types.CallToolResult) -> str:
    """The text parts of a result, joined."""
    return "".join(c.text for c in result.content if isinstance(c, mcp_types.TextContent))
