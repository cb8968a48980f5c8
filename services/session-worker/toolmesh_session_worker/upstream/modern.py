"""An upstream that speaks only the 2026-07-28 era of MCP: no handshake and no session.

A Streamable HTTP server that refuses ``initialize`` but answers ``server/discover`` with a version of
that era is reached this way (``opening`` tries it when the handshake fails). Every request is a POST
of its own (``upstream.stateless``):

- a 2026-07-28 client's request goes with its own ``_meta`` envelope, its ``InputRequiredResult``
  coming back as it is, as with a dual-era upstream;
- a handshake-era client's request, and toolmesh's own (discovery, health), go with toolmesh's
  envelope (with the log level its clients asked for with ``logging/setLevel``); the upstream's
  input requests are put to the client as the handshake era puts them
  (``upstream.input_rounds``), so such a client sees one call (toolmesh's own requests have no client
  to ask: their input requests are refused);
- the upstream's list changes and resource updates arrive on one ``subscriptions/listen`` stream,
  asking for what the upstream declares and for the resources clients subscribed to
  (``resources/subscribe`` and ``resources/unsubscribe`` change that stream); a stream that ends is
  reopened while the upstream answers ``server/discover``, and the session is lost when it does not.

What the upstream said in ``server/discover`` stands in for an initialize result, its protocol version
one of that era, which tells the gateway to reach it in that era only.
"""

from __future__ import annotations

import asyncio
import logging
import math
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import mcp_types
from pydantic import BaseModel, ValidationError

from toolmesh_session_worker.upstream import input_rounds
from toolmesh_session_worker.upstream.callbacks import (
    ListChangedCallback,
    LostCallback,
    SessionCallbacks,
    ToolsChangedCallback,
)
from toolmesh_session_worker.upstream.client_side import CURRENT_CALL, ClientSide
from toolmesh_session_worker.upstream.errors import UpstreamError
from toolmesh_session_worker.upstream.listing import list_all
from toolmesh_session_worker.upstream.stateless import StatelessHttp, own_envelope
from toolmesh_session_worker.upstream.transports import StreamableHttpTransport
from toolmesh_session_worker.upstream.wire import ProgressCallback

log = logging.getLogger("toolmesh.upstream")
_ResultT = TypeVar("_ResultT", bound=BaseModel)
CLIENT_INFO = {"name": "toolmesh", "version": "0.1.0"}
CLOSE_GRACE_SECONDS = 2.0
LISTEN_AGAIN_SECONDS = (1.0, 60.0)
"""How long toolmesh waits before reopening a ``subscriptions/listen`` stream the upstream ended: the
first, doubled while streams keep ending before ``LISTEN_STEADY_SECONDS``, up to the second."""
LISTEN_STEADY_SECONDS = 30.0
"""How long a listen stream must have lasted for the wait before the next to start again from the first:
each reopening makes toolmesh ask for every list again, so an upstream ending its streams soon after
they open (however soon) only slows its own reopening down."""
PROBE_TIMEOUT_SECONDS = 5.0
LISTEN_URI_BYTES = 256 * 1024
"""How many bytes of resource URIs the listen stream may ask for, all subscriptions together: every
subscription reopens the stream with all of them, so a client subscribing past this is refused."""
_LISTS = {"tools": "toolsListChanged", "prompts": "promptsListChanged", "resources": "resourcesListChanged"}


class ModernSession:
    """A connected 2026-07-28-only upstream. Build it with ``opening.open_session``."""

    def __init__(
        self,
        server_name: str,
        transport: StreamableHttpTransport,
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
        self._client_side = client_side
        self._callbacks = SessionCallbacks(
            server_name,
            on_tools_changed=on_tools_changed,
            on_list_changed=on_list_changed,
            on_lost=on_lost,
            client_side=client_side,
        )
        self._http: StatelessHttp | None = None
        self._subscribed: set[str] = set()
        self._log_level: str | None = None
        """The level its clients asked for (``logging/setLevel``), sent with toolmesh's requests."""
        self._resubscribe = anyio.Event()
        self._ready = anyio.Event()
        self._scope = anyio.CancelScope()
        self._runner: asyncio.Task[None] | None = None
        self._connect_error: UpstreamError | None = None
        self._lost_reason: str | None = None
        self._closing = False
        self._pending = 0

    @property
    def alive(self) -> bool:
        """True until the session was closed or lost."""
        return self._http is not None and self._lost_reason is None and not self._closing

    @property
    def pending(self) -> int:
        """Requests in flight."""
        return self._pending

    @property
    def pid(self) -> int | None:
        """None: a network upstream."""
        return None

    @property
    def lost_reason(self) -> str | None:
        """Why the session was lost, if it was."""
        return self._lost_reason

    @property
    def modern_versions(self) -> tuple[str, ...]:
        """The 2026-07-28-era versions the upstream named."""
        return self._http.versions if self._http is not None else ()

    @property
    def modern_tasks(self) -> bool:
        """Whether the upstream runs tasks of its own (it declared the extension)."""
        return self._http is not None and self._http.tasks

    @property
    def capabilities(self) -> mcp_types.ServerCapabilities:
        """What the upstream declared in ``server/discover``."""
        result = self.initialize_result
        return result.capabilities if result is not None else mcp_types.ServerCapabilities()

    async def start(self, connect_timeout: float) -> None:
        """Ask the upstream ``server/discover`` and start listening.

        Raises:
            UpstreamError: it does not answer with a 2026-07-28-era version within ``connect_timeout``.
        """
        self._runner = asyncio.create_task(self._run(connect_timeout), name=f"upstream-modern:{self.server_name}")
        with anyio.move_on_after(connect_timeout + CLOSE_GRACE_SECONDS):
            await self._ready.wait()
        if self._http is None:
            await self.close()
            words = f"{self.server_name}: no answer to server/discover within {connect_timeout}s"
            raise self._connect_error or UpstreamError(words, summary=words)

    async def list_tools(self, *, timeout: float = 60.0) -> list[mcp_types.Tool]:
        """All tools of the server."""
        tools: list[mcp_types.Tool] = await list_all(
            self, mcp_types.ListToolsRequest, mcp_types.ListToolsResult, "tools", timeout
        )
        if self._http is not None:
            self._http.tool_schemas = {tool.name: dict(tool.input_schema) for tool in tools}
        return tools

    async def send(
        self, request: mcp_types.ClientRequest, result_type: type[_ResultT], *, what: str, limit: float
    ) -> _ResultT:
        """One typed request, with toolmesh's envelope."""
        wire = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        raw = await self.request(wire["method"], wire.get("params"), timeout=limit)
        try:
            return result_type.model_validate(raw, by_name=False)
        except ValidationError as exc:
            words = f"invalid answer while {what}"
            raise UpstreamError(f"{self.server_name}: {words}: {exc}", summary=words) from exc

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
        """One request: as a 2026-07-28 client sent it (``envelope``), else with toolmesh's envelope and
        the upstream's input requests put to the client of ``call_id``."""
        http = self._require(f"sending {method}")
        if method in ("resources/subscribe", "resources/unsubscribe") and envelope is None:
            return self._subscription(method, params)
        if method == "logging/setLevel" and envelope is None:  # the era sends it with each request
            level = (params or {}).get("level")
            self._log_level = level if isinstance(level, str) else None
            return {}
        self._pending += 1
        token = CURRENT_CALL.set(call_id)  # notifications on this request's stream are its client's
        try:
            if envelope is not None:
                return await http.request(
                    method, params, envelope, timeout=timeout, progress=progress, notify=self._callbacks.message
                )
            own = own_envelope(http.versions[-1])
            if self._log_level is not None:
                own[mcp_types.LOG_LEVEL_META_KEY] = self._log_level

            async def send(with_answers: dict[str, Any], left: float) -> dict[str, Any]:
                return await http.request(
                    method, with_answers, own, timeout=left, progress=progress, notify=self._callbacks.message
                )

            return await input_rounds.completed(
                self.server_name,
                f"sending {method}",
                dict(params or {}),
                send,
                client_side=self._client_side,
                call_id=call_id,
                timeout=timeout,
            )
        finally:
            CURRENT_CALL.reset(token)
            self._pending -= 1

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,
        progress: ProgressCallback | None = None,
        call_id: str | None = None,
    ) -> mcp_types.CallToolResult:
        """Call one tool; a tool's own failure is a result with ``is_error`` set."""
        params = {"name": name, "arguments": arguments}
        raw = await self.request("tools/call", params, timeout=timeout, call_id=call_id, progress=progress)
        try:
            return mcp_types.CallToolResult.model_validate(raw, by_name=False)
        except ValidationError as exc:
            words = f"invalid answer while calling {name}"
            raise UpstreamError(f"{self.server_name}: {words}: {exc}", summary=words) from exc

    async def ping(self, *, timeout: float) -> None:
        """The era has no ``ping``: ``server/discover`` answers instead."""
        http = self._require("pinging")
        await http.request("server/discover", None, own_envelope(http.versions[-1]), timeout=timeout)

    async def close(self) -> None:
        """Stop listening and close the HTTP client. Idempotent."""
        self._closing = True
        runner = self._runner
        if runner is None or runner.done() or self._callbacks.running:
            self._scope.cancel()
            return
        self._scope.cancel()
        await asyncio.shield(runner)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- internals ---------------------------------------------------------------------------

    def _require(self, what: str) -> StatelessHttp:
        http = self._http
        if http is None or not self.alive:
            words = f"not connected ({self._lost_reason or 'session closed'}) while {what}"
            raise UpstreamError(f"{self.server_name}: {words}", summary=words)
        return http

    def _subscription(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Add or drop a resource of the listen stream (which is reopened with it)."""
        uri = (params or {}).get("uri")
        if not isinstance(uri, str):
            raise UpstreamError(f"{self.server_name}: {method} without a uri", code=mcp_types.INVALID_PARAMS)
        if method == "resources/subscribe":
            if uri not in self._subscribed and _size(self._subscribed | {uri}) > LISTEN_URI_BYTES:
                words = f"resources/subscribe past {LISTEN_URI_BYTES} bytes of subscribed URIs"
                raise UpstreamError(f"{self.server_name}: {words}", code=mcp_types.INVALID_PARAMS, summary=words)
            self._subscribed.add(uri)
        else:
            self._subscribed.discard(uri)
        self._resubscribe.set()
        return {}

    async def _run(self, connect_timeout: float) -> None:
        lost: str | None = None
        try:
            with self._scope:
                async with self._transport.stateless_client() as client:
                    http = StatelessHttp(self.server_name, self._transport.url, client, CLIENT_INFO)
                    if await http.discover(connect_timeout) and self._described(http):
                        self._http = http
                    self._ready.set()
                    if self._http is not None:
                        lost = await self._listen(http)
        except Exception as exc:  # the adapter boundary: the client's failure ends the session
            log.warning("upstream session failed: %s", exc, extra={"server": self.server_name})
            lost = f"the upstream failed: {type(exc).__name__}"
        finally:
            self._ready.set()
        if lost is not None and not self._closing:
            self._lost_reason = lost
            await self._callbacks.lost(lost)

    def _described(self, http: StatelessHttp) -> bool:
        """Turn the ``server/discover`` answer into the session's description (False: not one)."""
        found = http.discovered
        meta = found.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        info = meta.get(mcp_types.SERVER_INFO_META_KEY) or {"name": self.server_name, "version": "unknown"}
        try:
            self.initialize_result = mcp_types.InitializeResult.model_validate(
                {
                    "protocolVersion": http.versions[-1],
                    "capabilities": found.get("capabilities") or {},
                    "serverInfo": info,
                    "instructions": found.get("instructions"),
                },
                by_name=False,
            )
        except ValidationError as exc:
            words = f"{self.server_name}: connect failed: invalid server/discover answer"
            self._connect_error = UpstreamError(f"{words}: {exc}", summary=words)
            return False
        return True

    async def _listen(self, http: StatelessHttp) -> str:
        """Keep one ``subscriptions/listen`` stream open until the session closes; the reason it was
        lost when the upstream stops answering."""
        ended = False
        pause = LISTEN_AGAIN_SECONDS[0]
        opened = anyio.current_time()
        while True:
            self._resubscribe = anyio.Event()
            wanted = self._wanted()
            if ended:
                await self._tell_all_changed()  # what changed while no stream was open
            ended = False
            async with anyio.create_task_group() as tg:

                async def until_resubscribed() -> None:
                    await self._resubscribe.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(until_resubscribed)
                if wanted:
                    opened = anyio.current_time()
                    ended = await self._listened(http, wanted)
                    tg.cancel_scope.cancel()
            if ended:
                try:
                    await self.ping(timeout=PROBE_TIMEOUT_SECONDS)
                except UpstreamError as exc:
                    return f"upstream stopped answering: {exc.summary}"
                lasted = anyio.current_time() - opened
                steady = lasted >= LISTEN_STEADY_SECONDS
                pause = LISTEN_AGAIN_SECONDS[0] if steady else min(2 * pause, LISTEN_AGAIN_SECONDS[1])
                await anyio.sleep(pause)

    async def _listened(self, http: StatelessHttp, wanted: dict[str, Any]) -> bool:
        """Listen until the stream ends (True) or fails for good (False: the upstream refuses to listen)."""
        try:
            await http.request(
                "subscriptions/listen",
                {"notifications": wanted},
                own_envelope(http.versions[-1]),
                timeout=math.inf,
                notify=self._callbacks.message,
            )
        except UpstreamError as exc:
            if exc.code is not None:  # a JSON-RPC refusal: nothing is heard, the rest works
                log.warning("upstream refused subscriptions/listen: %s", exc, extra={"server": self.server_name})
                await anyio.sleep_forever()
        return True

    def _wanted(self) -> dict[str, Any]:
        """What the listen stream asks for: the list changes the upstream declares, subscribed resources."""
        declared = self.capabilities
        wanted: dict[str, Any] = {
            key: True for kind, key in _LISTS.items() if getattr(getattr(declared, kind, None), "list_changed", False)
        }
        if self._subscribed:
            wanted["resourceSubscriptions"] = sorted(self._subscribed)
        return wanted

    async def _tell_all_changed(self) -> None:
        """After a gap in listening: every declared list may have changed."""
        for kind in _LISTS:
            if getattr(getattr(self.capabilities, kind, None), "list_changed", False):
                notice = {"method": f"notifications/{kind}/list_changed"}
                await self._callbacks.message(mcp_types.server_notification_adapter.validate_python(notice))


def _size(uris: set[str]) -> int:
    return sum(len(uri.encode()) for uri in uris)
