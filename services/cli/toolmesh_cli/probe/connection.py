"""Opening a probe's session (Streamable HTTP, else legacy SSE) and reading what the server offers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import httpx2
import mcp_types as types
from mcp.client import Client
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

Transport = Literal["auto", "http", "sse"]
TRANSPORTS: tuple[Transport, ...] = ("auto", "http", "sse")
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""Connect/write/pool bound, and the idle read bound of a response stream."""
CALL_SECONDS = 120.0
MAX_PAGES = 50
"""Pages read of one list method before the listing stops (a server whose cursor never ends)."""
CLIENT_INFO = types.Implementation(name="toolmesh-probe", version="1.0.0")
LEGACY_ANSWERS = frozenset({400, 404, 405})
"""What a server that only speaks the legacy HTTP+SSE transport answers a Streamable HTTP POST."""
AUTH_ERRORS = (OAuthFlowError, OAuthTokenError, OAuthRegistrationError)
"""Failures of the authorization itself, reported as such however deep a task group wrapped them."""

_Page = TypeVar("_Page")


@dataclass
class Offer:
    """What a server offers: who it is, at which protocol version, its tools, prompts and resources."""

    transport: str
    protocol_version: str
    server: types.Implementation | None
    tools: list[types.Tool] = field(default_factory=list)
    prompts: list[types.Prompt] = field(default_factory=list)
    resources: list[types.Resource] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The offer as plain JSON values (the wire spelling of each model)."""

        def dump(model: Any) -> Any:
            return model.model_dump(mode="json", by_alias=True, exclude_none=True)

        return {
            "transport": self.transport,
            "protocol_version": self.protocol_version,
            "server": dump(self.server) if self.server else None,
            "tools": [dump(tool) for tool in self.tools],
            "prompts": [dump(prompt) for prompt in self.prompts],
            "resources": [dump(resource) for resource in self.resources],
        }


class _LastAnswer:
    """The status of the server's last answer to a POST on its MCP endpoint."""

    def __init__(self, url: str) -> None:
        self._url = httpx2.URL(url)
        self.status: int | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        if response.request.method == "POST" and response.request.url == self._url:
            self.status = response.status_code


async def _open(
    stack: AsyncExitStack, url: str, transport: Literal["http", "sse"], auth: httpx2.Auth | None, answer: _LastAnswer
) -> Client:
    if transport == "sse":

        def factory(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            return httpx2.AsyncClient(headers=headers, timeout=timeout or HTTP_TIMEOUT, auth=auth)

        streams = sse_client(url, auth=auth, httpx_client_factory=factory)
        client = Client(streams, client_info=CLIENT_INFO, mode="legacy", read_timeout_seconds=CALL_SECONDS)
    else:
        http = await stack.enter_async_context(
            httpx2.AsyncClient(timeout=HTTP_TIMEOUT, auth=auth, event_hooks={"response": [answer]})
        )
        client = Client(
            streamable_http_client(url, http_client=http), client_info=CLIENT_INFO, read_timeout_seconds=CALL_SECONDS
        )
    return await stack.enter_async_context(client)


def authorization_failure(exc: BaseException) -> BaseException | None:
    """The authorization error ``exc`` is or holds (a task group wraps what its tasks raise)."""
    if isinstance(exc, AUTH_ERRORS):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = authorization_failure(inner)
            if found is not None:
                return found
    return exc.__cause__ and authorization_failure(exc.__cause__)


@asynccontextmanager
async def connected(url: str, transport: Transport, auth: httpx2.Auth | None) -> AsyncIterator[tuple[Client, str]]:
    """A client session with the server at ``url`` and the transport it runs on. ``auto`` tries
    Streamable HTTP first, and legacy SSE when the server answers its POST with 400, 404 or 405
    (the spec's backwards-compatibility rule)."""
    kind: Literal["http", "sse"] = "sse" if transport == "sse" else "http"
    answer = _LastAnswer(url)
    stack = AsyncExitStack()
    try:
        client = await _open(stack, url, kind, auth, answer)
    except Exception:
        await stack.aclose()
        if transport != "auto" or answer.status not in LEGACY_ANSWERS:
            raise
        kind = "sse"
        client = await _open(stack, url, kind, auth, answer)
    async with stack:
        yield client, kind


async def _all(fetch: Callable[[str | None], Awaitable[_Page]], items: Callable[[_Page], list[Any]]) -> list[Any]:
    found: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        found.extend(items(page))
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            break
    return found


async def read_offer(client: Client, transport: str) -> Offer:
    """Tools, prompts and resources of the server, each listed only when its capabilities announce it."""
    capabilities = client.server_capabilities
    offer = Offer(transport=transport, protocol_version=client.protocol_version, server=client.server_info)
    if capabilities.tools is not None:
        offer.tools = await _all(lambda c: client.list_tools(cursor=c), lambda page: page.tools)
    if capabilities.prompts is not None:
        offer.prompts = await _all(lambda c: client.list_prompts(cursor=c), lambda page: page.prompts)
    if capabilities.resources is not None:
        offer.resources = await _all(lambda c: client.list_resources(cursor=c), lambda page: page.resources)
    return offer


async def call_tool(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call one tool; its result as plain JSON values."""
    result = await client.call_tool(name, arguments)
    dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped
