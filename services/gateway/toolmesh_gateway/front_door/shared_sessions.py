"""MCP sessions that work through any gateway replica: the SDK's session manager on a shared store.

The replica that opens a session writes its record (``McpSessionTable``) before the client sees
the ``initialize`` result. A replica that gets a request of a session it does not hold adopts it:
it rebuilds the connection from the record (negotiated version, the client's ``initialize``
params, already initialized) behind a transport with the same ``mcp-session-id``. Every request
is checked against the record first, so a session that ended or expired answers 404 everywhere,
as does a session used by another key, in another namespace or at another path. ``DELETE`` ends it
on every replica (``McpSessionEnded``); a session with no request and no open GET stream for the TTL
expires with its record. A key at its share of sessions ends its least recently used idle one the
same way when it opens another (``NamespaceSessions``). Its requests are answered by a
``LazyStreamTransport``.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol
from uuid import uuid4

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import INVALID_REQUEST, ErrorData, InitializeRequestParams, JSONRPCError
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from toolmesh.contracts.mcp_sessions import McpSessionRecord
from toolmesh.errors import ToolmeshError
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.front_door.lazy_streams import LazyStreamTransport
from toolmesh_gateway.front_door.session_channels import SessionChannels
from toolmesh_gateway.front_door.session_quota import NamespaceSessions
from toolmesh_gateway.front_door.session_table import McpSessionTable
from toolmesh_gateway.front_door.sessions import CALLER_KEY, refuse
from toolmesh_gateway.scope_headers import header

SESSION_ID = re.compile(r"[A-Za-z0-9_=-]{1,255}")
"""What an ``mcp-session-id`` may be: visible ASCII (the transport's rule) that is a valid key of the
session table (ids issued here are ``uuid4().hex``)."""

log = logging.getLogger("toolmesh.gateway.mcp")
TOUCH_FRACTION = 0.1
"""A record is rewritten (restarting its TTL) when older than this fraction of the TTL."""
KEEP_ALIVE_FRACTION = 1 / 3
"""While a replica holds a session's GET stream, it rewrites the record this often (fraction of the TTL)."""


class Announceable(Protocol):
    """What list changes are announced to: a handler's ``ServerSession``, or an adopted ``Connection``."""

    async def send_tool_list_changed(self) -> None: ...

    async def send_resource_list_changed(self) -> None: ...

    async def send_prompt_list_changed(self) -> None: ...


OnAdopt = Callable[[str, Connection, Scope], None]
"""Told of each session this replica adopts: its id, its connection, the request that brought it."""


@dataclass
class SharedSessions:
    """Makes the session managers of the front door's MCP servers, on one store and TTL.

    ``on_end`` runs with the id of each session this replica held a copy of and that ended
    elsewhere or expired (to release what it holds upstream).
    """

    table: McpSessionTable
    ttl_seconds: float
    on_end: Callable[[str], Awaitable[None]]
    json_wait_seconds: float
    held: NamespaceSessions
    """The sessions this replica holds, per namespace (each namespace's fair share)."""
    channels: SessionChannels
    """The connection of every session served here (registered while it runs)."""
    relay: Callable[[str, dict[str, Any]], Awaitable[bool]]
    """Hands a session's client's answer to the replica whose request it answers (False: this one)."""
    managers: list[SharedSessionManager] = field(default_factory=list, init=False, repr=False)
    """Every session manager made here (a key's sessions may be served by several)."""

    def manager(self, app: Server[Any], on_adopt: OnAdopt) -> SharedSessionManager:
        """A session manager for ``app`` whose sessions any replica serves."""
        made = SharedSessionManager(app, self, on_adopt)
        self.managers.append(made)
        return made

    async def evict(self, session_id: str, key_id: str) -> None:
        """End a key's idle session that makes way for its new one, as its ``DELETE`` would: the record
        is removed on every replica (which releases what it holds upstream) and its transport closed."""
        log.info("MCP session %s of key %s ended: the key opened another at its share", session_id[:8], key_id)
        await self.table.end(session_id)
        for manager in self.managers:
            await manager.discard(session_id)


class SharedSessionManager(StreamableHTTPSessionManager):
    """The SDK's Streamable HTTP session manager, with each session's record in the shared store."""

    def __init__(self, app: Server[Any], shared: SharedSessions, on_adopt: OnAdopt) -> None:
        super().__init__(app=app, session_idle_timeout=shared.ttl_seconds)
        self._shared = shared
        self._on_adopt = on_adopt
        self._session_tasks: TaskGroup | None = None  # the server task of every session served here
        self._adopting = anyio.Lock()  # one adoption at a time: a session is adopted once

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run the SDK's manager and the sessions' server tasks, dropping the copies of sessions that
        end on other replicas."""
        async with super().run(), anyio.create_task_group() as sessions:
            self._session_tasks = sessions
            subscription = await self._shared.table.follow_ends(self._drop)
            try:
                yield
            finally:
                with contextlib.suppress(Exception):  # the bus may already be closed at shutdown
                    await subscription.unsubscribe()
                sessions.cancel_scope.cancel()
                self._session_tasks = None

    async def handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The SDK's handling without its own body limit: every MCP route is behind the gateway's
        ``BodyLimit`` (``entry.guarded_mcp``), which already read the body within the same limit."""
        await self._handle_request(scope, receive, send)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = header(scope, MCP_SESSION_ID_HEADER)
        if session_id is None:  # initialize: the SDK admits it, ``_serve_opening_request`` records it
            await super()._handle_stateful_request(scope, receive, send)
            return
        if not SESSION_ID.fullmatch(session_id):  # never a key of the session table: a client's mistake
            await _bad_session_id()(scope, receive, send)
            return
        try:
            record = await self._shared.table.recent(session_id)
        except ToolmeshError as exc:
            await refuse(exc, scope, receive, send)
            return
        caller = scope.get(CALLER_KEY)
        if record is None:
            await self._drop(session_id)
        if (
            record is None
            or not isinstance(caller, Caller)
            or not record.belongs_to(scope["path"], caller.principal.key_id, caller.scope)
        ):
            await _not_found()(scope, receive, send)  # as if unknown: says nothing of whose it is
            return
        transport = self._server_instances.get(session_id) or await self._adopt(session_id, record, scope)
        if time.time() - record.touched_at > self._shared.ttl_seconds * TOUCH_FRACTION:
            await self._touch(session_id)
        with self._shared.held.in_use(session_id):  # not idle: a new session of its key cannot end it
            if scope.get("method") == "DELETE":
                await transport.handle_request(scope, receive, self._ending(session_id, send))
            elif scope.get("method") == "GET":  # the standalone stream: the session is in use while it is open
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._keep_alive, session_id)
                    await transport.handle_request(scope, receive, send)
                    tg.cancel_scope.cancel()
            else:
                await transport.handle_request(scope, receive, send)
        if transport.is_terminated:  # the client ended it (DELETE)
            await self._discard_session(session_id, transport)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        """The SDK's admission of a new session, on this manager's transport."""
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        session_id = uuid4().hex
        transport = self._transport(session_id)
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        return transport

    async def _touch(self, session_id: str) -> None:
        """Restart the session's idle TTL (a failed write only shortens it: the request goes on)."""
        try:
            await self._shared.table.touch(session_id)
        except ToolmeshError as exc:
            log.warning("MCP session %s not touched: %s", session_id[:64], exc)

    async def _keep_alive(self, session_id: str) -> None:
        """Restart the idle TTL of a session whose standalone stream this replica holds, until cancelled."""
        while True:
            await anyio.sleep(self._shared.ttl_seconds * KEEP_ALIVE_FRACTION)
            await self._touch(session_id)

    def _ending(self, session_id: str, send: Send) -> Send:
        """``send`` of a DELETE: the session ends on every replica before the client hears it did."""

        async def send_once_ended(message: Message) -> None:
            if message["type"] == "http.response.start" and int(message["status"]) < 400:
                await self._shared.table.end(session_id)
            await send(message)

        return send_once_ended

    async def _adopt(self, session_id: str, record: McpSessionRecord, scope: Scope) -> StreamableHTTPServerTransport:
        """Serve here a session another replica opened, from its record."""
        async with self._adopting:
            transport = self._server_instances.get(session_id)
            if transport is None:
                transport = self._transport(session_id)
                self._server_instances[session_id] = transport
                assert self._session_tasks is not None
                await self._session_tasks.start(self._run_session, transport, record)
                connection = self._shared.channels.connection(session_id)
                assert connection is not None  # registered before the session task started
                self._on_adopt(session_id, connection, scope)
                self._shared.held.adopt(session_id, record.namespace or "", record.key_id)
                log.info("adopted MCP session %s", session_id[:64])
        return transport

    async def _serve_opening_request(
        self, http_transport: StreamableHTTPServerTransport, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Serve the ``initialize`` that opens a session; it is recorded before the client sees the
        result (so its next request may go to any replica), and discarded unless it succeeded."""
        session_id = http_transport.mcp_session_id
        assert session_id is not None and self._session_tasks is not None
        assert isinstance(http_transport, LazyStreamTransport)  # ``_admit_session`` made it
        try:
            await self._admit(session_id, scope)
        except ToolmeshError as exc:
            await self._discard_session(session_id, http_transport)
            await refuse(exc, scope, receive, send)
            return
        status: int | None = None
        recorded = False

        async def send_once_recorded(message: Message) -> None:
            nonlocal status, recorded
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and not recorded and status is not None and status < 400:
                recorded = await self._record(session_id, scope)
            await send(message)

        try:
            await self._session_tasks.start(self._run_session, http_transport, None)
            await http_transport.handle_request(scope, receive, send_once_recorded)
        finally:
            self._shared.held.done(session_id)
            if not recorded:
                await self._discard_session(session_id, http_transport)

    async def _admit(self, session_id: str, scope: Scope) -> None:
        """Count the session its caller opens, ending the caller's key's session that makes way for it
        (``LimitExceeded``: none may; the session is then not counted)."""
        caller = scope.get(CALLER_KEY)
        namespace, key_id = (caller.scope or "", caller.principal.key_id) if isinstance(caller, Caller) else ("", "")
        evicted = self._shared.held.open(session_id, namespace, key_id)
        if evicted is not None:
            try:
                await self._shared.evict(evicted, key_id)
            except ToolmeshError:
                self._shared.held.done(session_id)
                raise

    async def _record(self, session_id: str, scope: Scope) -> bool:
        """Write the record of a session whose ``initialize`` succeeded (False: not yet)."""
        connection = self._shared.channels.connection(session_id)
        caller = scope.get(CALLER_KEY)
        if connection is None or connection.client_params is None or not isinstance(caller, Caller):
            return False
        record = McpSessionRecord(
            path=scope["path"],
            key_id=caller.principal.key_id,
            namespace=caller.scope,
            protocol_version=connection.protocol_version,
            client_params=connection.client_params.model_dump(by_alias=True, mode="json", exclude_none=True),
            touched_at=time.time(),
        )
        await self._shared.table.put(session_id, record)
        return True

    async def _run_session(
        self,
        transport: LazyStreamTransport,
        record: McpSessionRecord | None,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The session's server task: the SDK's loop on a new connection, or one rebuilt from ``record``."""
        session_id = transport.mcp_session_id
        assert session_id is not None
        async with transport.connect() as (read_stream, write_stream):
            dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                read_stream, write_stream, inline_methods=frozenset({"initialize"})
            )
            connection = _connection(dispatcher, session_id, record)
            self._shared.channels.add(session_id, connection, transport)
            task_status.started()
            try:
                idle_scope = transport.idle_scope or anyio.CancelScope()
                with idle_scope:
                    await serve_connection(
                        self.app, dispatcher, connection=connection, lifespan_state=self._lifespan_state
                    )
                if idle_scope.cancelled_caught:
                    log.info("MCP session %s idle here", session_id[:64])
            except Exception:
                log.exception("MCP session %s crashed", session_id[:64])
            finally:
                self._shared.channels.remove(session_id)
                await self._discard_session(session_id, transport)

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        """The SDK's discard, and the session no longer counts for its namespace here."""
        self._shared.held.close(session_id)
        await super()._discard_session(session_id, transport)

    async def discard(self, session_id: str) -> None:
        """Stop serving this replica's copy of a session that ended (none: nothing to do)."""
        transport = self._server_instances.get(session_id)
        if transport is not None:
            await self._discard_session(session_id, transport)

    async def _drop(self, session_id: str) -> None:
        """A session ended elsewhere or expired: stop serving this replica's copy and release it."""
        await self.discard(session_id)
        await self._shared.on_end(session_id)

    def _transport(self, session_id: str) -> LazyStreamTransport:
        return LazyStreamTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=self.json_response,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
            json_wait_seconds=self._shared.json_wait_seconds,
            relay=partial(self._shared.relay, session_id),
        )


def _connection(
    dispatcher: JSONRPCDispatcher[TransportContext], session_id: str, record: McpSessionRecord | None
) -> Connection:
    """A connection waiting for its handshake, or (adopted) one initialized as ``record`` says."""
    if record is None:
        return Connection.for_loop(dispatcher, session_id=session_id)
    connection = Connection(
        dispatcher,
        protocol_version=record.protocol_version,
        session_id=session_id,
        client_params=InitializeRequestParams.model_validate(record.client_params),
    )
    connection.initialized.set()
    return connection


def _bad_session_id() -> Response:
    """The answer to an ``mcp-session-id`` this gateway could not have issued (400, as the SDK answers
    a missing one)."""
    message = "Bad Request: malformed Mcp-Session-Id header"
    body = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=message))
    text = body.model_dump_json(by_alias=True, exclude_unset=True)
    return Response(text, status_code=400, media_type="application/json")


def _not_found() -> Response:
    """The SDK's answer to an unknown session."""
    body = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message="Session not found"))
    text = body.model_dump_json(by_alias=True, exclude_unset=True)
    return Response(text, status_code=404, media_type="application/json")
