"""An MCP client of the gateway's ``/mcp`` for tests: the SDK's Streamable HTTP client with a bearer token."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types
from mcp.client.session import ClientRequestContext, ClientSession, IncomingMessage, SamplingFnT
from mcp.client.streamable_http import streamable_http_client

from tests.harness import ADMIN_TOKEN, System


@dataclass
class Received:
    """Notifications the server sent on the session's standalone stream."""

    messages: list[Any] = field(default_factory=list)
    standalone: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, message: IncomingMessage) -> None:
        self.messages.append(message)

    async def saw_response(self, response: httpx2.Response) -> None:
        """An HTTP response hook: a 200 to a GET is the standalone stream opening. The server registers
        the stream in the same loop turn in which it sends these headers, so from here on its
        notifications reach this session instead of being dropped."""
        if response.request.method == "GET" and response.status_code == 200:
            self.standalone.set()

    async def standalone_opened(self, timeout: float = 30) -> None:
        """Wait until the client has opened its standalone stream (``timeout`` only guards a hang)."""
        async with asyncio.timeout(timeout):
            await self.standalone.wait()

    def tools_changed(self) -> int:
        return sum(isinstance(m, mcp_types.ToolListChangedNotification) for m in self.messages)

    def updated(self, uri: str) -> int:
        """How many ``notifications/resources/updated`` for ``uri`` arrived."""
        kind = mcp_types.ResourceUpdatedNotification
        return sum(isinstance(m, kind) and str(m.params.uri) == uri for m in self.messages)


def mcp_url(system: System, mode: str | None = None, namespace: str | None = None, path: str = "/mcp") -> str:
    base = f"http://{system.settings.host}:{system.settings.port}{path}"
    query = "&".join(f"{k}={v}" for k, v in (("mode", mode), ("namespace", namespace)) if v)
    return f"{base}?{query}" if query else base


@contextlib.asynccontextmanager
async def mcp_session(
    system: System,
    *,
    mode: str | None = None,
    token: str = ADMIN_TOKEN,
    received: Received | None = None,
    namespace: str | None = None,
    path: str = "/mcp",
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with the gateway (at ``path``: ``/mcp`` or ``/mcp/{name}``)."""
    headers = {"Authorization": f"Bearer {token}"}
    hooks = {"response": [received.saw_response]} if received else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120), event_hooks=hooks) as http,
        streamable_http_client(mcp_url(system, mode, namespace, path), http_client=http) as (read, write),
        ClientSession(read, write, message_handler=received.handle if received else None) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: mcp_types.CallToolResult) -> str:
    """The text parts of a result, joined."""
    return "".join(c.text for c in result.content if isinstance(c, mcp_types.TextContent))


async def sample_by_echo(context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams) -> Any:
    """A sampling callback whose "model" answers ``echo of <question>``."""
    asked = params.messages[0].content
    text = asked.text if isinstance(asked, mcp_types.TextContent) else "?"
    return mcp_types.CreateMessageResult(
        role="assistant", content=mcp_types.TextContent(type="text", text=f"echo of {text}"), model="test-model"
    )


async def two_roots(context: ClientRequestContext) -> mcp_types.ListRootsResult:
    """A roots callback: two file roots."""
    return mcp_types.ListRootsResult(
        roots=[mcp_types.Root(uri="file:///work/a"), mcp_types.Root(uri="file:///work/b")]  # type: ignore[arg-type]
    )


@contextlib.asynccontextmanager
async def session_at(
    system: System,
    path: str,
    *,
    sampling: bool = False,
    received: Received | None = None,
    on_sample: SamplingFnT | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized session with the gateway at ``path`` (``/mcp``, ``/mcp/{server}``); with
    ``sampling`` the client declares sampling and roots and answers with ``sample_by_echo`` and
    ``two_roots``."""
    url = f"http://{system.settings.host}:{system.settings.port}{path}"
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    hooks = {"response": [received.saw_response]} if received else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30, event_hooks=hooks) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(
            read,
            write,
            sampling_callback=on_sample or (sample_by_echo if sampling else None),
            list_roots_callback=two_roots if sampling else None,
            message_handler=received.handle if received else None,
        ) as session,
    ):
        await session.initialize()
        yield session
