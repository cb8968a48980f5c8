"""A Streamable HTTP server transport that opens an SSE stream for a request only when it needs one.

The SDK answers every request POST with an SSE stream (a response and four tasks per request),
even when the only message for it is its result. The spec lets the server answer a request with
either ``application/json`` or ``text/event-stream``. This transport waits for the first message
of the request: when it is the result, it is the JSON body; when anything comes first (progress,
a log message, a server → client request such as sampling), the stream opens with it and carries
the rest, as the SDK's would. A result slower than ``json_wait_seconds`` comes on an SSE stream too,
opened when that time is up: its pings keep proxies and load balancers from closing a quiet call.
A client's answer to a server → client request of another gateway replica (a load balancer without
stickiness sent it here) is relayed to that replica (``relay``), whose call waits for it. Everything
else (``initialize``, notifications, other responses, GET, DELETE, resumable streams with an event
store) is the SDK's own handling.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from http import HTTPStatus
from typing import Any

import anyio
import pydantic_core
from mcp.server.streamable_http import (
    CONTENT_TYPE_JSON,
    CONTENT_TYPE_SSE,
    GET_STREAM_KEY,
    MCP_SESSION_ID_HEADER,
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    EventStore,
    SSEEvent,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.message import SessionMessage
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

ASKING_MARK = b'"tm-'
"""Every id of a request a replica sends a client starts so (``contracts.clients.asking_id``)."""
Relay = Callable[[dict[str, Any]], Awaitable[bool]]
"""Hands a client's answer to the replica whose request it answers; False when that is this one."""


class LazyStreamTransport(StreamableHTTPServerTransport):
    """The SDK's transport, answering a request with JSON unless something precedes its result or
    it takes longer than ``json_wait_seconds``."""

    def __init__(
        self,
        mcp_session_id: str | None,
        *,
        json_wait_seconds: float,
        event_store: EventStore | None = None,
        relay: Relay | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(mcp_session_id, event_store=event_store, **kwargs)
        self.json_wait_seconds = json_wait_seconds
        self.resumable = event_store is not None
        """With an event store, every request keeps the SDK's (resumable) SSE stream."""
        self._relay = relay

    @property
    def streaming(self) -> bool:
        """Whether the client's standalone stream (its GET) is open on this transport."""
        return GET_STREAM_KEY in self._request_streams

    async def deliver(self, message: dict[str, Any]) -> bool:
        """Take a client's answer that reached another replica as if it had been posted here (False: not
        an answer, or the session is not served)."""
        try:
            answer = jsonrpc_message_adapter.validate_python(message)
        except ValidationError:
            return False
        writer = self._read_stream_writer
        if not isinstance(answer, JSONRPCResponse | JSONRPCError) or writer is None:
            return False
        try:
            await writer.send(SessionMessage(answer))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def _handle_post_request(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        if self._relay is not None and await self._relayed(request):
            await Response(status_code=HTTPStatus.ACCEPTED)(scope, receive, send)
            return
        message = await self._plain_request(request)
        if message is None:
            await super()._handle_post_request(scope, request, receive, send)
            return
        if not await self._validate_request_headers(request, send):
            return
        writer = self._read_stream_writer
        assert writer is not None  # connect() ran: the session's task serves this transport
        request_id = str(message.id)
        streams = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
        self._request_streams[request_id] = streams
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        first: EventMessage | None = None
        try:
            await writer.send(self._create_session_message(message, request, request_id, version))
            with anyio.move_on_after(self.json_wait_seconds):  # a message handed over is never lost to it
                first = await streams[1].receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            await self._close_request_stream(request_id)
            ended = ErrorData(code=INTERNAL_ERROR, message="Session terminated before the request completed")
            error = JSONRPCError(jsonrpc="2.0", id=None, error=ended)
            await _json_answer(error, self.mcp_session_id, HTTPStatus.INTERNAL_SERVER_ERROR)(scope, receive, send)
            return
        except BaseException:  # cancelled (the server shutting down): the session must not keep the stream
            with anyio.CancelScope(shield=True):
                await self._close_request_stream(request_id)
            raise
        if first is not None and isinstance(first.message, JSONRPCResponse | JSONRPCError):
            await self._close_request_stream(request_id)
            await _json_answer(first.message, self.mcp_session_id)(scope, receive, send)
            return
        await self._stream(request_id, None if first is None else _sse_event(first), scope, receive, send)

    async def _relayed(self, request: Request) -> bool:
        """Whether the POST was a client's answer to another replica's request, handed to that replica."""
        if request.headers.get("content-type", "").split(";")[0].strip() != CONTENT_TYPE_JSON:
            return False
        raw = await request.body()
        if ASKING_MARK not in raw:  # not an answer to a replica's request: no second parse of a request
            return False
        try:
            body = pydantic_core.from_json(raw)
        except ValueError:
            return False
        is_answer = isinstance(body, dict) and "method" not in body and ("result" in body or "error" in body)
        return is_answer and self._relay is not None and await self._relay(body)

    async def _close_request_stream(self, request_id: str) -> None:
        """Close and unregister the stream of a request answered here (or abandoned)."""
        streams = self._request_streams.pop(request_id, None)
        if streams is not None:
            await streams[0].aclose()
            await streams[1].aclose()

    async def _plain_request(self, request: Request) -> JSONRPCRequest | None:
        """The POST's request when this transport answers it itself (else None: the SDK's handling)."""
        has_json, has_sse = check_accept_headers(request)
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        if self.resumable or not (has_json and has_sse) or content_type != CONTENT_TYPE_JSON:
            return None
        try:
            message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(await request.body()))
        except (ValueError, ValidationError):
            return None
        if not isinstance(message, JSONRPCRequest) or message.method == "initialize":
            return None
        return message

    async def _stream(
        self, request_id: str, first: SSEEvent | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Answer with an SSE stream that starts with ``first`` (if any) and ends after the request's result."""
        sse_writer, sse_reader = anyio.create_memory_object_stream[SSEEvent](0)
        self._sse_stream_writers[request_id] = sse_writer
        headers = {
            "Cache-Control": "no-cache, no-transform",
            "Connection": "keep-alive",
            "Content-Type": CONTENT_TYPE_SSE,
            **({MCP_SESSION_ID_HEADER: self.mcp_session_id} if self.mcp_session_id else {}),
        }
        stream_reader = self._request_streams[request_id][1]
        response = EventSourceResponse(
            content=sse_reader,
            data_sender_callable=partial(self._run_sse_writer, request_id, sse_writer, stream_reader, first),
            headers=headers,
        )
        try:
            await response(scope, receive, send)
        finally:
            await sse_reader.aclose()


def _json_answer(
    message: JSONRPCResponse | JSONRPCError, session_id: str | None, status: HTTPStatus = HTTPStatus.OK
) -> Response:
    """A POST answered with one JSON-RPC message, with the session's id (as the SDK's transport writes it)."""
    headers = {MCP_SESSION_ID_HEADER: session_id} if session_id else None
    body = message.model_dump_json(by_alias=True, exclude_unset=True)
    return Response(body, status_code=status, headers=headers, media_type=CONTENT_TYPE_JSON)


def _sse_event(message: EventMessage) -> SSEEvent:
    """The SSE event of a message that precedes a request's result (with its event id, if it has one)."""
    event: SSEEvent = {"event": "message", "data": message.message.model_dump_json(by_alias=True, exclude_unset=True)}
    if message.event_id:
        event["id"] = message.event_id
    return event
