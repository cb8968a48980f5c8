"""A REST tool server behind the upstream surface (the connection API spec's adapter).

* connect: ``GET {url}/health`` answers 200, retried (``RestPolicy``: 3 attempts, then waits of
  ``0.5 * (attempt + 1)`` s, each request bounded by 30 s by default);
* discover: ``GET {url}/tools``, translated whole by ``upstream.translation`` (a malformed list is
  a protocol error naming what is wrong);
* call: ``POST {url}/tools/execute`` with ``tool``, ``arguments`` and a fresh ``requestId``; 200 is the
  result (an error object ``TOOL_EXECUTION_FAILED`` is a tool error, ``isError``), 404 is
  ``TOOL_NOT_FOUND`` listing the tools the server lists now (a tool it had listed makes the worker
  publish the new list), any other status is a protocol error (``EXECUTION_FAILED``);
* ping: ``GET {url}/health``.

Requests go to those three paths under the base URL only (``toolmesh.egress.rest_endpoint``), to
addresses the server's egress policy allows, following redirects on the same host only; a refusal is
``UpstreamMisconfigured`` (not retried). The config's ``headers`` (bearer tokens, ``${VAR}`` already
expanded) go with every request, and for a server registered with OAuth (``auth``) the grant's access
token as ``Authorization: Bearer`` (``upstream.bearer.BearerAuth``: refreshed before it expires, and
once more when the server answers 401). No connection is held between requests (the client pools
keep-alive connections), so a request that cannot reach the server makes the session check
``/health`` once, and a failed check ends the session (``on_lost``), as a broken MCP transport does.
To MCP clients it describes itself as an MCP server offering tools only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types
from pydantic import ValidationError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_incrementing

from toolmesh.egress.policy import EgressPolicy
from toolmesh.platform.supervision import TaskSet
from toolmesh_session_worker.upstream.errors import (
    UpstreamError,
    UpstreamMisconfigured,
    UpstreamRefused,
    UpstreamTimeout,
)
from toolmesh_session_worker.upstream.rest_answers import execution_result
from toolmesh_session_worker.upstream.rest_exchange import RestExchange
from toolmesh_session_worker.upstream.tools_only import ToolsOnlySession
from toolmesh_session_worker.upstream.translation import (
    MCPConnectionError,
    MCPProtocolError,
    MCPToolNotFoundError,
    as_error,
    domain_tool_execution_to_mcp,
    domain_tool_to_mcp,
    mcp_tools_response_to_domain,
)
from toolmesh_session_worker.upstream.transports import session_http_client
from toolmesh_session_worker.upstream.wire import ProgressCallback

log = logging.getLogger("toolmesh.upstream.rest")
REST_PROTOCOL_VERSION = "1.0.0"
"""The version of the connection API spec's REST protocol, shown as the server's version."""
PROBE_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class RestPolicy:
    """Retries and timeout of REST tool servers (settings ``rest_*``)."""

    attempts: int = 3
    backoff_seconds: float = 0.5
    timeout_seconds: float = 30.0


class RestSession(ToolsOnlySession):
    """A REST tool server in use. Build it with ``open_rest_session``."""

    def __init__(
        self,
        server_name: str,
        url: str,
        headers: Mapping[str, str],
        policy: RestPolicy,
        *,
        on_lost: Callable[[str], Awaitable[None]] | None = None,
        on_tools_changed: Callable[[], Awaitable[None]] | None = None,
        http_client: httpx2.AsyncClient | None = None,
        egress: EgressPolicy | None = None,
        auth: httpx2.Auth | None = None,
    ) -> None:
        super().__init__(server_name, "a REST tool server", "REST tool server", REST_PROTOCOL_VERSION)
        self._base = url.rstrip("/")
        self._policy = policy
        self._on_lost = on_lost
        self._on_tools_changed = on_tools_changed
        timeout = httpx2.Timeout(policy.timeout_seconds)
        client = session_http_client(
            {"Accept": "application/json", **headers},
            http_client,
            timeout,
            upstream=url,
            egress=egress or EgressPolicy(),
            auth=auth,
        )
        self._exchange = RestExchange(server_name, self._base, client, self._unreachable)
        self._tools: list[str] = []  # names of the last tool list, for a 404's answer
        self._probes = TaskSet(f"rest {server_name}")

    async def connect(self, connect_timeout: float) -> None:
        """``GET /health`` until it answers 200 (``RestPolicy`` retries), within ``connect_timeout`` in all."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._policy.attempts),
            wait=wait_incrementing(start=self._policy.backoff_seconds, increment=self._policy.backoff_seconds),
            retry=retry_if_exception_type(MCPConnectionError),
            reraise=True,
        )
        try:
            async with asyncio.timeout(connect_timeout):
                async for attempt in retrying:
                    with attempt:
                        await self._health(self._policy.timeout_seconds)
        except MCPConnectionError as exc:
            words = f"{self.server_name}: connect failed after {self._policy.attempts} attempts: {exc}"
            raise UpstreamError(words, summary=words) from exc
        except TimeoutError as exc:
            words = f"{self.server_name}: no healthy answer within {connect_timeout:g}s"
            raise UpstreamError(words, summary=words) from exc
        self._alive = True

    async def list_tools(self, *, timeout: float = 60.0) -> list[mcp_types.Tool]:
        """``GET /tools``, translated whole; ``UpstreamError`` naming what is wrong with a malformed list."""
        answer = await self._exchange.answer("GET", "/tools", timeout=timeout, what="listing tools")
        try:
            tools = mcp_tools_response_to_domain(answer)
            listed = [mcp_types.Tool.model_validate(domain_tool_to_mcp(t)) for t in tools]
        except MCPProtocolError as exc:  # toolmesh's own words about the list's shape
            words = f"{self.server_name}: protocol error: invalid tool list: {exc}"
            raise UpstreamError(words, summary=words) from exc
        except ValidationError as exc:
            raise UpstreamError(
                f"{self.server_name}: protocol error: invalid tool list: {exc}",
                summary=f"{self.server_name}: protocol error: invalid tool list",
            ) from exc
        self._tools = [t.name for t in listed]
        return listed

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,
        progress: ProgressCallback | None = None,
        call_id: str | None = None,
    ) -> mcp_types.CallToolResult:
        """``POST /tools/execute``; a failure the server reports for the tool it ran is ``is_error``.

        Raises:
            ToolNotFound: the server answered 404 (the tools it listed are in the context).
            ExecutionFailed: any other non-200 answer, or an answer that breaks the protocol.
            UpstreamTimeout: no answer within ``timeout`` (the request is abandoned).
            UpstreamError: the server could not be reached.
        """
        return mcp_types.CallToolResult.model_validate(await self._answer_call(name, arguments, timeout))

    async def ping(self, *, timeout: float) -> None:
        """``GET /health`` answers 200 within ``timeout``; ``UpstreamTimeout`` or ``UpstreamError`` otherwise."""
        try:
            await self._health(timeout)
        except MCPConnectionError as exc:
            raise UpstreamError(f"{self.server_name}: {exc}", summary=str(exc)) from exc

    async def close(self) -> None:
        """Stop using the server and close the connection pool. Idempotent."""
        self._alive = False
        await self._probes.cancel_all()
        await self._exchange.aclose()

    # -- internals ---------------------------------------------------------------------------

    async def _answer_call(self, name: str, arguments: dict[str, Any], timeout: float) -> dict[str, Any]:
        body = domain_tool_execution_to_mcp(name, arguments)
        self._pending += 1
        try:
            response = await self._exchange.send("POST", "/tools/execute", timeout, f"calling {name}", body=body)
        finally:
            self._pending -= 1
        self._exchange.refuse_credentials(response, f"POST /tools/execute ({name})", statuses=(401,))
        if response.status_code == 404:
            stale = name in self._tools
            with contextlib.suppress(UpstreamError):  # what it has now; else what it listed last
                await self.list_tools(timeout=min(timeout, PROBE_TIMEOUT_SECONDS))
            if stale and self._on_tools_changed is not None:
                await self._on_tools_changed()  # it was listed: the published list is out of date
            raise as_error(MCPToolNotFoundError(name, self._tools), self.server_name, name)
        return execution_result(response, self.server_name, name)

    async def _health(self, timeout: float) -> None:
        try:
            response = await self._exchange.send("GET", "/health", timeout, "checking health", probe=False)
        except UpstreamTimeout as exc:
            raise MCPConnectionError(f"GET /health: no answer within {timeout:g}s") from exc
        except (UpstreamMisconfigured, UpstreamRefused):
            raise  # refused by the egress policy, or the grant refused: no retry can help
        except UpstreamError as exc:
            log.info("GET /health failed: %s", exc.reason, extra={"server": self.server_name})
            raise MCPConnectionError(f"GET /health failed: {exc.summary}") from exc
        self._exchange.refuse_credentials(response, "GET /health")
        if response.status_code != 200:
            raise MCPConnectionError(f"GET /health answered HTTP {response.status_code}")

    def _unreachable(self) -> None:
        """A request could not reach the server: check ``/health`` in the background while in use."""
        if self._alive:
            self._probes.spawn(self._probe())

    async def _probe(self) -> None:
        """A request could not reach the server: give it up (``on_lost``) unless ``/health`` still answers."""
        try:
            await self._health(PROBE_TIMEOUT_SECONDS)
        except MCPConnectionError as exc:
            if not self._alive or self._lost_reason is not None:
                return
            self._lost_reason = f"upstream stopped answering: {exc}"
            self._alive = False
            log.warning("REST tool server lost: %s", exc, extra={"server": self.server_name})
            if self._on_lost is not None:
                await self._on_lost(self._lost_reason)


async def open_rest_session(
    server_name: str,
    config: Mapping[str, Any],
    policy: RestPolicy,
    *,
    connect_timeout: float,
    on_lost: Callable[[str], Awaitable[None]] | None = None,
    on_tools_changed: Callable[[], Awaitable[None]] | None = None,
    http_client: httpx2.AsyncClient | None = None,
    egress: EgressPolicy | None = None,
    auth: httpx2.Auth | None = None,
) -> RestSession:
    """Connect to a REST tool server (``config``: ``url``, ``headers``; validated and ``${VAR}``-expanded)
    whose requests go only where ``egress`` allows (public addresses when None), each authenticated by
    ``auth`` if given (OAuth's bearer token).

    Raises:
        UpstreamMisconfigured: the egress policy refuses the server's URL or address.
        UpstreamError: ``/health`` did not answer 200 within the retries.
    """
    headers = {str(k): str(v) for k, v in (config.get("headers") or {}).items()}
    session = RestSession(
        server_name,
        str(config["url"]),
        headers,
        policy,
        on_lost=on_lost,
        on_tools_changed=on_tools_changed,
        http_client=http_client,
        egress=egress,
        auth=auth,
    )
    try:
        await session.connect(connect_timeout)
    except BaseException:
        await session.close()
        raise
    return session
