"""The 2026-07-28 era of a Streamable HTTP upstream: every request a POST of its own, no session.

An upstream that answers ``server/discover`` with a version of that era gets the requests of clients
of that era in it (``UpstreamSession.request`` with an ``envelope``), while handshake-era clients
keep the handshake session. The client's protocol version, capabilities and log level ride each
request's ``_meta`` as the client sent them, with toolmesh as the client; the ``MCP-Protocol-Version``,
``Mcp-Method`` and ``Mcp-Name`` headers mirror the body. The answer is one JSON message, JSON lines,
or an SSE stream: progress and log notifications on it are relayed before the result. An
``InputRequiredResult`` comes back as it is: the gateway seals its ``requestState`` for the client.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
    find_invalid_x_mcp_header,
    mcp_param_headers,
    x_mcp_header_map,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toolmesh_session_worker.upstream.challenges import MET, GrantRefused, ScopeChallenge, refusal
from toolmesh_session_worker.upstream.errors import (
    UpstreamError,
    UpstreamTimeout,
    rpc_error,
)
from toolmesh_session_worker.upstream.stdio import MAX_MESSAGE_BYTES
from toolmesh_session_worker.upstream.wire import ProgressCallback

ENVELOPE_KEYS = frozenset(
    {
        mcp_types.PROTOCOL_VERSION_META_KEY,
        mcp_types.CLIENT_CAPABILITIES_META_KEY,
        mcp_types.LOG_LEVEL_META_KEY,
    }
)
"""What of a client's 2026-07-28 ``_meta`` envelope is relayed (``clientInfo`` is toolmesh's own)."""
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The Tasks extension: an upstream that declares it in ``server/discover`` runs tasks of its own."""
DISCOVER_CAPABILITIES: dict[str, Any] = {"sampling": {}, "elicitation": {}, "roots": {}}
"""What toolmesh declares when it asks an upstream ``server/discover``: it relays all three."""
_PROGRESS_TOKEN = "toolmesh-progress"
Notify = Callable[[mcp_types.ServerNotification], Awaitable[None]]
"""Where the other notifications on a request's stream go: the session's, routed as the handshake
era's (a list change to discovery, the rest to the client whose request it is)."""
log = logging.getLogger("toolmesh.upstream")


def own_envelope(version: str) -> dict[str, Any]:
    """The envelope of toolmesh's own requests in this era (``server/discover``, discovery's lists)."""
    return {mcp_types.PROTOCOL_VERSION_META_KEY: version, mcp_types.CLIENT_CAPABILITIES_META_KEY: DISCOVER_CAPABILITIES}


class StatelessHttp:
    """2026-07-28 requests to one Streamable HTTP upstream, over ``client`` (the session's own HTTP
    client: its headers, auth, egress policy)."""

    def __init__(self, server_name: str, url: str, client: httpx2.AsyncClient, client_info: dict[str, Any]) -> None:
        self._server_name = server_name
        self._url = url
        self._client = client
        self._client_info = client_info
        self._ids = itertools.count(1)
        self.tool_schemas: dict[str, dict[str, Any]] = {}
        """The input schemas of the upstream's tools as last listed: a ``tools/call`` mirrors the
        arguments its tool marks ``x-mcp-header`` into ``Mcp-Param-*`` headers, as the upstream checks."""
        self.versions: tuple[str, ...] = ()
        """The 2026-07-28-era versions the upstream named in ``server/discover`` (none: it speaks only
        the handshake era)."""
        self.discovered: dict[str, Any] = {}
        """The upstream's ``server/discover`` result (capabilities, instructions, server info)."""
        self.tasks = False
        """Whether the upstream declared the Tasks extension in ``server/discover``'s capabilities."""

    async def discover(self, timeout: float) -> tuple[str, ...]:
        """Ask the upstream ``server/discover``; remember and return the versions of this era both sides
        speak (none when it does not answer the method, or names only handshake-era versions)."""
        try:
            result = await self.request(
                "server/discover", None, own_envelope(MODERN_PROTOCOL_VERSIONS[-1]), timeout=timeout
            )
        except UpstreamError:
            return ()
        named = result.get("supportedVersions")
        self.discovered = result
        self.versions = tuple(v for v in MODERN_PROTOCOL_VERSIONS if isinstance(named, list) and v in named)
        capabilities = result.get("capabilities")
        extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
        self.tasks = bool(self.versions) and isinstance(extensions, dict) and TASKS_EXTENSION in extensions
        return self.versions

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None,
        envelope: dict[str, Any],
        *,
        timeout: float,
        progress: ProgressCallback | None = None,
        notify: Notify | None = None,
    ) -> dict[str, Any]:
        """Send one request in this era and return the upstream's raw result.

        Raises:
            UpstreamTimeout: no answer within ``timeout`` (the POST is abandoned, which cancels it).
            UpstreamRefused: the upstream refused the grant (``UpstreamScopeRequired``: it wants a wider
                scope), as the grant's auth noted (``challenges.MET``).
            UpstreamError: the upstream answered with a JSON-RPC error (``code``, ``data``), an HTTP
                error without one, or something that is not a JSON-RPC answer.
        """
        body, headers = self._message(method, params, envelope, progress is not None)
        what = f"sending {method}"
        met: list[ScopeChallenge | GrantRefused] = []  # what the grant met (``challenges``), as a session's
        listening = MET.set(met)
        try:
            return await self._send(body, headers, what, timeout=timeout, progress=progress, notify=notify)
        except UpstreamError as exc:
            refused = refusal(self._server_name, what, met)
            if refused is None or isinstance(exc, UpstreamTimeout):
                raise
            raise refused from exc
        finally:
            MET.reset(listening)

    async def _send(
        self,
        body: dict[str, Any],
        headers: dict[str, str],
        what: str,
        *,
        timeout: float,
        progress: ProgressCallback | None,
        notify: Notify | None,
    ) -> dict[str, Any]:
        with anyio.move_on_after(timeout):
            try:
                async with self._client.stream("POST", self._url, json=body, headers=headers) as response:
                    async for message in _messages(response):
                        if "method" in message:
                            await self._notification(message, progress, notify)
                        elif message.get("id") == body["id"]:
                            return self._answer(message, what)
            except httpx2.HTTPError as exc:
                words = f"connection lost while {what} ({type(exc).__name__})"
                raise UpstreamError(f"{self._server_name}: {words}: {exc}", summary=words) from exc
            except (ValueError, httpx2.SSEError) as exc:
                words = f"invalid answer while {what}"
                raise UpstreamError(f"{self._server_name}: {words}: {exc}", summary=words) from exc
            words = f"no answer while {what}"
            raise UpstreamError(f"{self._server_name}: {words}", summary=words)
        words = f"timed out after {timeout}s while {what}"
        raise UpstreamTimeout(f"{self._server_name}: {words}", summary=words)

    def _message(
        self, method: str, params: dict[str, Any] | None, envelope: dict[str, Any], progress: bool
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The JSON-RPC request and its headers."""
        params = dict(params or {})
        meta = {k: v for k, v in (params.get("_meta") or {}).items() if k != "progressToken"}
        meta.update({k: v for k, v in envelope.items() if k in ENVELOPE_KEYS})
        meta[mcp_types.CLIENT_INFO_META_KEY] = self._client_info
        if progress:
            meta["progressToken"] = _PROGRESS_TOKEN
        params["_meta"] = meta
        version = str(meta.get(mcp_types.PROTOCOL_VERSION_META_KEY) or MODERN_PROTOCOL_VERSIONS[-1])
        headers = {
            MCP_PROTOCOL_VERSION_HEADER: version,
            MCP_METHOD_HEADER: method,
            "accept": "application/json, text/event-stream",
        }
        name_key = NAME_BEARING_METHODS.get(method)
        if name_key is not None and isinstance(params.get(name_key), str):
            headers[MCP_NAME_HEADER] = encode_header_value(params[name_key])
        schema = self.tool_schemas.get(str(params.get("name"))) if method == "tools/call" else None
        arguments = params.get("arguments")
        if schema is not None and isinstance(arguments, dict) and find_invalid_x_mcp_header(schema) is None:
            headers.update(mcp_param_headers(x_mcp_header_map(schema), arguments))
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}, headers

    async def _notification(
        self,
        message: dict[str, Any],
        progress: ProgressCallback | None,
        notify: Notify | None,
    ) -> None:
        """Progress to ``progress``; other notifications an MCP server may send to ``notify`` (any other
        message with a method, a server → client request among them, is dropped)."""
        params = message.get("params") if isinstance(message.get("params"), dict) else None
        if message["method"] == "notifications/progress":
            done = _number(params.get("progress")) if params is not None else None
            if progress is not None and params is not None and done is not None:
                words = params.get("message")
                await progress(done, _number(params.get("total")), str(words) if isinstance(words, str) else None)
        elif notify is not None and "id" not in message:
            try:
                notification = mcp_types.server_notification_adapter.validate_python(message, by_name=False)
            except ValidationError:
                log.info("dropped a notification that is not one", extra={"server": self._server_name})
                return
            await notify(notification)

    def _answer(self, message: dict[str, Any], what: str) -> dict[str, Any]:
        """The result of a response, or ``UpstreamError`` with its JSON-RPC error."""
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            code = int(code) if isinstance(code, int) else mcp_types.INTERNAL_ERROR
            raise rpc_error(self._server_name, what, code, str(error.get("message", "")), error.get("data"))
        result = message.get("result")
        if not isinstance(result, dict):
            raise ValueError("a response without a result object")
        return result


async def _messages(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of an answer: SSE events, or one JSON value per line of a JSON body (a
    bare HTTP error status without a JSON-RPC body becomes ``UpstreamError``-worthy ``ValueError``)."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "text/event-stream":
        async for event in httpx2.EventSource(response, max_event_size=MAX_MESSAGE_BYTES):
            if event.data:
                yield _message(event.data)
        return
    received = bytearray()  # the line being read: each piece is looked at once (a re-scan is quadratic)
    async for chunk in response.aiter_bytes():
        *ends, rest = chunk.split(b"\n")
        for end in ends:
            received += end
            _bound(received)
            if received.strip():
                yield _message(received)
            received = bytearray()
        received += rest
        _bound(received)
    if received.strip():
        yield _message(received)
    elif response.status_code >= 400:
        raise ValueError(f"HTTP {response.status_code} without a JSON-RPC answer")


def _bound(line: bytearray) -> None:
    if len(line) > MAX_MESSAGE_BYTES:
        raise ValueError(f"an answer past {MAX_MESSAGE_BYTES} bytes")


def _number(value: object) -> float | None:
    """``value`` as a finite float (None: not a number, or one no float holds)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _message(data: str | bytes | bytearray) -> dict[str, Any]:
    try:
        message = json.loads(data)
    except RecursionError as exc:  # nested past the parser's depth: as invalid as bad JSON
        raise ValueError("a JSON-RPC message nested too deep") from exc
    if not isinstance(message, dict):
        raise ValueError("a JSON-RPC message that is not an object")
    return message
