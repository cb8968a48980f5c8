"""One live MCP client session to an upstream server.

The SDK's transports and ``ClientSession`` are async context managers that must be entered
and exited in one task, so each session runs in a runner task owned by ``UpstreamSession``:
``transport -> ClientSession -> initialize()``, then it waits until ``close()`` or until the
transport dies. Callers talk to the session from any task; the SDK multiplexes concurrent
requests by JSON-RPC id. A Streamable HTTP upstream that also speaks the 2026-07-28 era (it answers
``server/discover`` with it) gets that era's clients' requests in that era (``upstream.stateless``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import anyio.abc
import mcp_types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from toolmesh_session_worker.upstream.callbacks import (
    ListChangedCallback,
    LostCallback,
    SessionCallbacks,
    ToolsChangedCallback,
)
from toolmesh_session_worker.upstream.challenges import MET, GrantRefused, ScopeChallenge, refusal
from toolmesh_session_worker.upstream.client_side import (
    CURRENT_CALL,
    ClientAnswers,
    ClientSide,
)
from toolmesh_session_worker.upstream.errors import (
    UpstreamError,
    UpstreamMisconfigured,
    UpstreamRefused,
    UpstreamTimeout,
    describe,
    refused_status,
    rpc_error,
    summarize,
    unstartable,
    with_hint,
)
from toolmesh_session_worker.upstream.listing import list_all
from toolmesh_session_worker.upstream.stateless import StatelessHttp
from toolmesh_session_worker.upstream.transports import StreamableHttpTransport, UpstreamTransport
from toolmesh_session_worker.upstream.watch import WatchedReadStream
from toolmesh_session_worker.upstream.wire import (
    ProgressCallback,
    ProgressForwarder,
    RawRequest,
    RawResult,
)

logger = logging.getLogger("toolmesh.upstream")

CLOSE_GRACE_SECONDS = 2.0
"""How long close() lets the transport shut down politely (HTTP DELETE, stdin EOF) before cancelling."""
PROBE_TIMEOUT_SECONDS = 5.0
"""Bound of the ping that checks an HTTP upstream after one of its response streams broke."""
CLIENT_INFO = mcp_types.Implementation(name="toolmesh", version="0.1.0")
DISCOVER_TIMEOUT_SECONDS = 5.0
"""Bound of the ``server/discover`` that asks a Streamable HTTP upstream whether it speaks 2026-07-28."""

_ResultT = TypeVar("_ResultT", bound=BaseModel)


class UpstreamSession:
    """A connected upstream MCP server. Build it with ``opening.open_session``."""

    def __init__(
        self,
        server_name: str,
        transport: UpstreamTransport,
        *,
        on_tools_changed: ToolsChangedCallback | None = None,
        on_lost: LostCallback | None = None,
        client_side: ClientSide | None = None,
        on_list_changed: ListChangedCallback | None = None,
    ) -> None:
        self.server_name = server_name
        self.initialize_result: mcp_types.InitializeResult | None = None
        self.modern_only: dict[str, tuple[str, ...]] = {}
        self._transport = transport
        self._callbacks = SessionCallbacks(
            server_name,
            on_tools_changed=on_tools_changed,
            on_list_changed=on_list_changed,
            on_lost=on_lost,
            client_side=client_side,
        )
        self._answers = ClientAnswers(client_side)
        self._session: ClientSession | None = None
        self._stateless: StatelessHttp | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._scope = anyio.CancelScope()
        self._ready = anyio.Event()
        self._stop = anyio.Event()
        self._connect_error: UpstreamError | None = None
        self._lost_reason: str | None = None
        self._closing = False
        self._alive = False
        self._pending = 0
        self._runner: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        """True while the session is usable: False once the transport died or close() ran."""
        return self._alive and not self._stop.is_set()

    @property
    def pending(self) -> int:
        """Number of tool calls in flight."""
        return self._pending

    @property
    def pid(self) -> int | None:
        """Pid (and process group id) of the STDIO server process; None for HTTP transports."""
        return self._transport.pid

    @property
    def lost_reason(self) -> str | None:
        """Why the connection was lost, if it was."""
        return self._lost_reason

    async def list_tools(self, *, timeout: float = 60.0) -> list[mcp_types.Tool]:
        """All tools of the server, following ``nextCursor`` until the last page (``timeout`` in total)."""
        tools: list[mcp_types.Tool] = await list_all(
            self, mcp_types.ListToolsRequest, mcp_types.ListToolsResult, "tools", timeout
        )
        if self._stateless is not None:
            self._stateless.tool_schemas = {tool.name: dict(tool.input_schema) for tool in tools}
        return tools

    async def send(
        self, request: mcp_types.ClientRequest, result_type: type[_ResultT], *, what: str, limit: float
    ) -> _ResultT:
        """One typed request (``UpstreamTimeout`` after ``limit`` seconds, ``UpstreamError`` otherwise)."""
        return await self._request(self._require(what), request, result_type, what=what, limit=limit)

    @property
    def modern_versions(self) -> tuple[str, ...]:
        """The 2026-07-28-era versions the upstream speaks besides the handshake (none: handshake only)."""
        return self._stateless.versions if self._stateless is not None else ()

    @property
    def modern_tasks(self) -> bool:
        """Whether the upstream runs tasks of its own in the 2026-07-28 era (it declared the extension)."""
        return self._stateless is not None and self._stateless.tasks

    @property
    def capabilities(self) -> mcp_types.ServerCapabilities:
        """What the upstream declared at initialize."""
        result = self.initialize_result
        return result.capabilities if result is not None else mcp_types.ServerCapabilities()

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float,
        call_id: str | None = None,
        progress: ProgressCallback | None = None,
        envelope: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Send one request as is and return the upstream's raw result.

        ``call_id`` rides the task's context: a server → client request the upstream sends on this
        request's stream (Streamable HTTP) reaches ``ClientSide`` with it. ``envelope``: the
        2026-07-28 ``_meta`` envelope of a client of that era, whose request goes upstream in that
        era when the upstream speaks it (its ``InputRequiredResult`` coming back as it is).

        Raises:
            UpstreamTimeout: no answer within ``timeout``; the request was cancelled upstream.
            UpstreamError: the connection was lost, or the upstream answered with a JSON-RPC error
                (``code``, and ``data`` with the error's data).
        """
        what = f"sending {method}"
        session = self._require(what)
        token = CURRENT_CALL.set(call_id)
        self._pending += 1
        try:
            if envelope is not None and self._stateless is not None:
                return await self._stateless.request(
                    method,
                    params,
                    envelope,
                    timeout=timeout,
                    progress=progress,
                    notify=self._callbacks.message,
                )
            request = RawRequest(method=method, params=params)
            result = await self._request(session, request, RawResult, what=what, limit=timeout, progress=progress)
            return dict(result.model_extra or {})
        finally:
            self._pending -= 1
            CURRENT_CALL.reset(token)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,
        progress: ProgressCallback | None = None,
        call_id: str | None = None,
    ) -> mcp_types.CallToolResult:
        """Call one tool. A tool error comes back as a result with ``is_error`` set, not raised.

        Raises:
            UpstreamTimeout: no answer within ``timeout`` seconds; the request was cancelled upstream.
            UpstreamError: the connection was lost, or the upstream answered with a JSON-RPC error.
        """
        what = f"calling {name}"
        session = self._require(what)
        request = mcp_types.CallToolRequest(params=mcp_types.CallToolRequestParams(name=name, arguments=arguments))
        self._pending += 1
        token = CURRENT_CALL.set(call_id)
        try:
            # Plain result type: a proxy forwards results; it does not re-validate output schemas.
            return await self._request(
                session, request, mcp_types.CallToolResult, what=what, limit=timeout, progress=progress
            )
        finally:
            self._pending -= 1
            CURRENT_CALL.reset(token)

    async def ping(self, *, timeout: float) -> None:
        """Round-trip a ping; raises ``UpstreamTimeout`` or ``UpstreamError``."""
        session = self._require("pinging")
        await self._request(session, mcp_types.PingRequest(), mcp_types.EmptyResult, what="pinging", limit=timeout)

    async def close(self) -> None:
        """Stop the session and its transport (for STDIO: the whole process group). Idempotent."""
        self._closing = True
        self._alive = False
        self._stop.set()
        runner = self._runner
        if runner is None or runner.done() or self._callbacks.running:
            return  # inside our own callback the runner finishes by itself once it returns
        await asyncio.wait({runner}, timeout=CLOSE_GRACE_SECONDS)
        self._scope.cancel()
        await asyncio.shield(runner)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- internals ---------------------------------------------------------------------------

    def _require(self, what: str) -> ClientSession:
        if self._session is None or not self.alive:
            reason = self._lost_reason or "session closed"
            words = f"not connected ({reason}) while {what}"
            raise UpstreamError(f"{self.server_name}: {words}", summary=words)
        return self._session

    async def _request(
        self,
        session: ClientSession,
        request: mcp_types.ClientRequest | RawRequest,
        result_type: type[_ResultT],
        *,
        what: str,
        limit: float | None,
        progress: ProgressCallback | None = None,
    ) -> _ResultT:
        # Cancelling the awaiting task makes the SDK send notifications/cancelled (shielded, bounded).
        scope = anyio.move_on_after(limit) if limit is not None else anyio.CancelScope()
        on_progress = ProgressForwarder(progress) if progress is not None else None
        met: list[ScopeChallenge | GrantRefused] = []  # what this request's grant met (see ``challenges``)
        listening = MET.set(met)
        try:
            with scope:
                return await session.send_request(request, result_type, progress_callback=on_progress)
        except MCPError as exc:
            if (refused := refusal(self.server_name, what, met)) is not None:
                raise refused from exc
            if exc.code == mcp_types.CONNECTION_CLOSED:
                self._suspect_connection()
                raise UpstreamError(
                    f"{self.server_name}: connection lost while {what} ({exc.message})",
                    code=exc.code,
                    summary=f"connection lost while {what}",
                ) from exc
            raise rpc_error(self.server_name, what, exc.code, exc.message, exc.error.data) from exc
        except ValidationError as exc:
            raise UpstreamError(
                f"{self.server_name}: invalid answer while {what}: {exc}", summary=f"invalid answer while {what}"
            ) from exc
        except anyio.BrokenResourceError as exc:
            words = f"connection lost while {what}"
            raise UpstreamError(f"{self.server_name}: {words}", summary=words) from exc
        finally:
            MET.reset(listening)
        words = f"timed out after {limit}s while {what}"
        raise UpstreamTimeout(f"{self.server_name}: {words}", summary=words)

    def _suspect_connection(self) -> None:
        """A request saw CONNECTION_CLOSED while the transport still looks up: check it with a ping.

        STDIO and SSE report a dead peer as end of stream; Streamable HTTP only fails the one
        request whose response stream broke, so a ping tells a dead server from a dropped stream.
        """
        if self.alive and self._tg is not None:
            self._tg.start_soon(self._probe)

    async def _probe(self) -> None:
        try:
            await self.ping(timeout=PROBE_TIMEOUT_SECONDS)
        except UpstreamError as exc:
            logger.warning("upstream stopped answering: %s", exc, extra={"server": self.server_name})
            self._mark_lost(f"upstream stopped answering: {exc.summary}")

    def _mark_lost(self, reason: str) -> None:
        if self._closing or self._lost_reason is not None:
            return
        self._lost_reason = reason
        self._alive = False
        self._stop.set()

    async def start(self, connect_timeout: float) -> None:
        """Run the session (transport, ``ClientSession``, ``initialize``) and wait for the handshake.

        Raises:
            UpstreamError: no answer to ``initialize`` within ``connect_timeout``, or the connect failed.
        """
        self._runner = asyncio.create_task(self._run(), name=f"upstream-session:{self.server_name}")
        answered = False
        try:
            with anyio.move_on_after(connect_timeout):
                await self._ready.wait()
        finally:
            answered = self._ready.is_set()
            if not answered:  # timed out, or our caller was cancelled
                self._closing = True
                self._scope.cancel()
                await asyncio.shield(self._runner)  # the runner sets _ready on its way out: not an answer
        if not answered or self._connect_error is not None:
            words = with_hint(f"{self.server_name}: no answer to initialize within {connect_timeout}s", self._transport)
            raise self._connect_error or UpstreamError(words, summary=words)

    async def _run(self) -> None:
        failure: str | None = None  # for the log
        summary: str | None = None  # for everything else
        refused: int | None = None
        broken = False  # the process could not be started as configured
        try:
            with self._scope:
                await self._serve()
        except Exception as exc:  # the adapter boundary: every driver error becomes a reason
            failure, summary = describe(exc), summarize(exc)
            refused = refused_status(exc) or self._transport.refused()
            broken = unstartable(exc)
            logger.debug("upstream session ended with an error", exc_info=True, extra={"server": self.server_name})
        finally:
            self._alive = False
            self._session = None
        if not self._ready.is_set():
            if not self._closing:
                closed = self._lost_reason or "the upstream closed the connection"
                reason, words = failure or closed, summary or closed
                kind: type[UpstreamError] = UpstreamError
                if refused is not None:
                    kind, words = UpstreamRefused, f"HTTP {refused}: the upstream refused toolmesh's credentials"
                    reason = f"{reason} ({words})"
                elif broken:
                    kind = UpstreamMisconfigured
                self._connect_error = kind(
                    with_hint(f"{self.server_name}: connect failed: {reason}", self._transport),
                    summary=with_hint(f"{self.server_name}: connect failed: {words}", self._transport),
                )
            self._ready.set()
            return
        if failure is not None and summary is not None:
            logger.warning("upstream session failed: %s", failure, extra={"server": self.server_name})
            self._mark_lost(summary)
        if self._lost_reason is not None:
            await self._callbacks.lost(self._lost_reason)

    async def _serve(self) -> None:
        async with self._transport.connect() as (read, write), self._stateless_era() as stateless:
            watched = WatchedReadStream(read, self._mark_lost)
            async with anyio.create_task_group() as tg:
                async with ClientSession(
                    watched,
                    write,
                    message_handler=self._callbacks.message,
                    client_info=CLIENT_INFO,
                    sampling_callback=self._answers.sampling,
                    elicitation_callback=self._answers.elicitation,
                    list_roots_callback=self._answers.roots,
                ) as session:
                    self.initialize_result = await session.initialize()
                    if stateless is not None and await stateless.discover(DISCOVER_TIMEOUT_SECONDS):
                        self._stateless = stateless
                    self._session = session
                    self._tg = tg
                    self._alive = not self._stop.is_set()
                    self._ready.set()
                    await self._stop.wait()
                    self._alive = False
                    self._tg = None
                    self._stateless = None
                tg.cancel_scope.cancel()

    @contextlib.asynccontextmanager
    async def _stateless_era(self) -> AsyncIterator[StatelessHttp | None]:
        """The 2026-07-28 side of a Streamable HTTP upstream (None for the other transports)."""
        if not isinstance(self._transport, StreamableHttpTransport):
            yield None
            return
        async with self._transport.stateless_client() as client:
            info = CLIENT_INFO.model_dump(by_alias=True, mode="json", exclude_none=True)
            yield StatelessHttp(self.server_name, self._transport.url, client, info)
