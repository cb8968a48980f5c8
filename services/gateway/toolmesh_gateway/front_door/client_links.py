"""The gateway end of server → client traffic: MCP client sessions of this replica, reachable over NATS.

Each session with a client gets a bus id (``contracts.clients.client_id``: this replica and the
session's ``mcp-session-id``; a 2026-07-28 request without a session gets one of its own). A
handler ``enter``s a link for the request it serves and names its upstream call; an upstream's
request or notification that arrives for that call goes on that request's own stream, anything
else on the session's standalone stream. A session whose client declared no capability for a
request, or that speaks the 2026-07-28 protocol (no server → client requests there), is declared
incapable to the owner, which then answers the upstream with an error at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.shared.dispatcher import CallOptions, Outbound
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import Scope

from toolmesh.contracts.clients import (
    EVERY_REPLICA,
    FORWARDED_REQUESTS,
    NO_CLIENT,
    ClientAnswer,
    ClientNotification,
    ClientRequest,
    ResumeInput,
    ResumeWithdrawn,
    asked_by,
    asking_id,
    client_id,
)
from toolmesh.contracts.rpc import ClientGoneRpc, ClientRef, RpcReply
from toolmesh.errors import RoutingFailed, ToolmeshError, ValidationFailed
from toolmesh.platform.bus import dispatch, verbs
from toolmesh.platform.bus.dispatch import Dispatcher
from toolmesh.platform.bus.interface import Bus, Message, Subscription
from toolmesh.platform.supervision import TaskSet
from toolmesh_gateway.catalog_feed import CatalogFeed
from toolmesh_gateway.forwarding import Forwarder
from toolmesh_gateway.front_door.session_channels import SessionChannels
from toolmesh_gateway.scope_headers import header

log = logging.getLogger("toolmesh.gateway.clients")
MAX_LINKS = 10_000
NOTIFY_SECONDS = 5.0
"""Bound of delivering one notification to a client (they are delivered in order, one at a time)."""
Ctx = ServerRequestContext[Any, Any]
UNKNOWN_STATE = "unknown or expired requestState"
"""The one answer to a 2026-07-28 ``requestState`` that is not the caller's to present, whatever the reason."""


def request_channel(ctx: Ctx) -> Outbound:
    """The request-scoped back-channel of a request (its own POST stream on Streamable HTTP)."""
    return ctx.session._request_outbound  # the SDK keeps this channel on the per-request session only


@dataclass
class PendingInput:
    """An upstream's request for a 2026-07-28 client, waiting to be handed out as an input request;
    ``respond`` gives the client's answer to the upstream (once; later answers are dropped)."""

    request: ClientRequest
    answer: asyncio.Future[RpcReply]

    def respond(self, reply: RpcReply) -> None:
        """Answer the upstream's request (unless it was answered or given up already)."""
        if not self.answer.done():
            self.answer.set_result(reply)


@dataclass
class ClientLink:
    """One client session: how to reach it, what it declared, which upstream calls are its.

    A *detached* link (a 2026-07-28 request) has no stream to send requests on: upstream requests
    for it queue in ``inputs`` for the ``InputBridge``.
    """

    ref: ClientRef
    standalone: Outbound
    calls: dict[str, Outbound] = field(default_factory=dict)  # upstream call id -> request channel
    servers: set[str] = field(default_factory=set)  # server ids it subscribed or set a level on
    log_level: str | None = None
    pending: dict[str, asyncio.Task[Any]] = field(default_factory=dict)  # client request id -> task
    detached: bool = False
    inputs: asyncio.Queue[PendingInput] = field(default_factory=asyncio.Queue)


class ClientLinks:
    """Client sessions of this replica, and the subscription that brings their traffic from the bus.

    A session's standalone channel comes from ``channels``, where the session manager registers
    the connection of each session it serves."""

    def __init__(self, bus: Bus, replica: str, channels: SessionChannels) -> None:
        self._bus = bus
        self.replica = replica
        self._channels = channels
        self._links: dict[str, ClientLink] = {}
        self._sub: Subscription | None = None
        self._every: Subscription | None = None  # standalone notifications for sessions streaming here
        self._local = itertools.count(1)
        self._asked = itertools.count(1)  # the ids of the requests sent to clients (``asking_id``)
        self._resume: Callable[[str, ResumeInput], Awaitable[RpcReply]] | None = None
        self._withdraw: Callable[[str, ResumeWithdrawn], None] | None = None
        self._answers = TaskSet("client requests")  # one per request: a slow client holds up no other
        self._dispatcher = Dispatcher(
            verbs.CLIENT,
            {
                verbs.CLIENT_REQUEST: self._request,
                verbs.CLIENT_NOTIFY: self._notified,
                verbs.CLIENT_ANSWER: self._answered,
                verbs.CLIENT_RESUME: self._resumed,
                verbs.CLIENT_WITHDRAW: self._withdrawn,
            },
            span_name="client",
            errors=_bus_error,
        )

    async def start(self) -> None:
        """Subscribe to this replica's client subjects (owned: only this replica serves them, so a
        session-worker in this process hands its traffic over without NATS)."""
        self._sub = await self._bus.subscribe(verbs.CLIENT.wildcard(self.replica), self._on_message, owned=True)
        self._every = await self._bus.subscribe(verbs.CLIENT.wildcard(EVERY_REPLICA), self._on_message)

    async def close(self) -> None:
        """Unsubscribe (pending client requests are answered by their own timeouts)."""
        for sub in (self._sub, self._every):
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
        self._sub = self._every = None
        await self._answers.cancel_all()

    # -- handlers' side --------------------------------------------------------------------------

    def link(self, ctx: Ctx) -> ClientLink:
        """The link of the session a request belongs to (made on first use)."""
        session = _session_id(ctx) or f"req{next(self._local)}"
        key = client_id(self.replica, session)
        link = self._links.get(key)
        if link is None:
            link = ClientLink(ref=_ref(key, ctx), standalone=self._channels.standalone(_session_id(ctx)))
            self._links[key] = link
            while len(self._links) > MAX_LINKS:  # sessions that ended without a DELETE
                self._links.pop(next(iter(self._links)))
        return link

    @contextlib.contextmanager
    def call(self, ctx: Ctx, call_id: str) -> Iterator[ClientRef]:
        """While the block runs, traffic for upstream call ``call_id`` goes on this request's stream."""
        link = self.link(ctx)
        link.calls[call_id] = request_channel(ctx)
        try:
            yield link.ref
        finally:
            link.calls.pop(call_id, None)
            if _session_id(ctx) is None and not link.calls:
                self._links.pop(link.ref.id, None)

    def detached(self, ctx: Ctx) -> ClientLink:
        """A link of its own for one 2026-07-28 request (and its retries), until ``forget``."""
        key = client_id(self.replica, f"req{next(self._local)}")
        standalone = self._channels.standalone(_session_id(ctx))
        link = ClientLink(ref=_ref(key, ctx, detached=True), standalone=standalone, detached=True)
        self._links[key] = link
        return link

    def forget(self, link: ClientLink) -> None:
        """Drop a detached link (its request is over)."""
        self._links.pop(link.ref.id, None)

    def drop(self, session: str) -> ClientLink | None:
        """Forget a session that ended; returns its link (to release what it held upstream)."""
        return self._links.pop(client_id(self.replica, session), None)

    def serve_resumes(
        self,
        resume: Callable[[str, ResumeInput], Awaitable[RpcReply]],
        withdraw: Callable[[str, ResumeWithdrawn], None],
    ) -> None:
        """Who completes, here, a 2026-07-28 retry that reached another replica (by the parked id), and
        who cancels it when the client gives that retry up."""
        self._resume, self._withdraw = resume, withdraw

    async def withdraw_at(self, replica: str, parked_id: str, starter: str) -> None:
        """Tell ``replica`` that the client gave up the retry it completes for this one."""
        withdrawn = ResumeWithdrawn(starter=starter)
        await dispatch.publish(self._bus, verbs.CLIENT_WITHDRAW, client_id(replica, parked_id), withdrawn)

    async def resume_at(self, replica: str, parked_id: str, retry: ResumeInput, timeout: float) -> RpcReply:
        """Have ``replica``, whose upstream request waits, complete a retry that reached this one."""
        body = await dispatch.request(
            self._bus, verbs.CLIENT_RESUME, client_id(replica, parked_id), retry, timeout=timeout
        )
        return RpcReply.model_validate_json(body)

    async def relay(self, session: str, answer: dict[str, Any]) -> bool:
        """Hand a session's client's answer to the replica whose request it answers (the client's POST
        reached this one); False when this replica asked, or no replica did (the SDK's own handling)."""
        replica = asked_by(answer.get("id"))
        if replica is None or replica == self.replica:
            return False
        await dispatch.publish(
            self._bus, verbs.CLIENT_ANSWER, client_id(replica, session), ClientAnswer(message=answer)
        )
        return True

    # -- the bus side ----------------------------------------------------------------------------

    async def _on_message(self, msg: Message) -> None:
        if self._dispatcher.verb_of(msg.subject) is verbs.CLIENT_NOTIFY:  # in order, each bounded
            with anyio.move_on_after(NOTIFY_SECONDS):
                await self._dispatcher.dispatch(msg)
        else:  # a request (or what the dispatcher refuses) is answered in a task of its own
            self._answers.spawn(self._dispatcher.dispatch(msg))

    async def _request(self, key: str, request: ClientRequest) -> RpcReply:
        link = self._links.get(key)
        if link is not None and link.detached:
            return await _handed_out(link, request)
        if link is None:
            return _error_reply(NO_CLIENT, "the client session is gone")
        if request.method not in FORWARDED_REQUESTS:
            return _error_reply(mcp_types.METHOD_NOT_FOUND, f"{request.method} is not forwarded to clients")
        task = asyncio.ensure_future(self._ask(link, request))
        link.pending[request.request_id] = task
        try:
            return await task
        except asyncio.CancelledError:
            return _error_reply(mcp_types.INTERNAL_ERROR, "the upstream withdrew its request")
        finally:
            link.pending.pop(request.request_id, None)

    async def _notified(self, key: str, note: ClientNotification) -> None:
        replica, _, session = key.partition(".")
        if replica == EVERY_REPLICA:  # for the replica holding the session's standalone stream: is it this one?
            if self._channels.streaming(session):
                await _notify_on(self._channels.standalone(session), note)
            return
        link = self._links.get(key)
        if link is not None:
            await self._notify(link, note)

    async def _resumed(self, key: str, retry: ResumeInput) -> RpcReply:
        if self._resume is None:
            return _error_reply(mcp_types.INVALID_PARAMS, UNKNOWN_STATE)
        return await self._resume(key.partition(".")[2], retry)

    async def _withdrawn(self, key: str, withdrawn: ResumeWithdrawn) -> None:
        if self._withdraw is not None:
            self._withdraw(key.partition(".")[2], withdrawn)

    async def _answered(self, key: str, answer: ClientAnswer) -> None:
        """A client's answer to a request of this replica, relayed by the replica its POST reached."""
        session = key.partition(".")[2]
        if not await self._channels.deliver(session, answer.message):
            log.debug("answer for MCP session %s dropped: not served here", session[:16])

    async def _ask(self, link: ClientLink, request: ClientRequest) -> RpcReply:
        channel = link.calls.get(request.call_id or "") or link.standalone
        opts: CallOptions = {"request_id": asking_id(self.replica, next(self._asked))}
        try:
            with anyio.fail_after(request.timeout_seconds):
                result = await channel.send_raw_request(request.method, request.params, opts)
        except MCPError as exc:
            return _error_reply(exc.code, exc.message, exc.error.data)
        except TimeoutError:
            return _error_reply(-32001, f"the client did not answer {request.method} in time")
        except Exception as exc:  # a client that went away, or a channel that cannot send requests
            return _error_reply(NO_CLIENT, f"the client cannot take {request.method}: {exc}")
        return RpcReply(ok=True, result=result)

    async def _notify(self, link: ClientLink, note: ClientNotification) -> None:
        if note.method == "notifications/cancelled":
            task = link.pending.get(str((note.params or {}).get("requestId")))
            if task is not None:
                task.cancel()
            return
        if note.method == "notifications/message" and not _passes(note.params, link.log_level):
            return
        channel = link.calls.get(note.call_id or "")
        session = link.ref.id.partition(".")[2]
        if channel is None and not link.detached and not self._channels.streaming(session):
            # The client's standalone stream is open on another replica (or nowhere): that one delivers it.
            await dispatch.publish(self._bus, verbs.CLIENT_NOTIFY, client_id(EVERY_REPLICA, session), note)
            return
        await _notify_on(channel or link.standalone, note)


async def _notify_on(channel: Outbound, note: ClientNotification) -> None:
    try:
        await channel.notify(note.method, note.params)
    except Exception as exc:  # the client went away: nothing to deliver to
        log.debug("notification %s not delivered: %s", note.method, exc)


async def release_if_deleted(scope: Scope, links: ClientLinks, forwarder: Forwarder, feed: CatalogFeed) -> None:
    """After a request was served: when it was the DELETE of a client session, release that client."""
    session = header(scope, MCP_SESSION_ID_HEADER)
    if scope.get("method") == "DELETE" and session:
        await release_client(links, forwarder, feed, session)


async def release_client(links: ClientLinks, forwarder: Forwarder, feed: CatalogFeed, session: str) -> None:
    """A client session ended: the owners of the servers it subscribed to or set a level on let go."""
    link = links.drop(session)
    if link is None:
        return
    for server_id in link.servers:
        server = feed.catalog.server(server_id)
        if server is None:
            continue
        try:
            await forwarder.control(server, "client_gone", ClientGoneRpc(client=link.ref))
        except ToolmeshError as exc:
            log.info("releasing client %s on %s failed: %s", link.ref.id, server.name, exc)


_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def _passes(params: dict[str, Any] | None, wanted: str | None) -> bool:
    level = str((params or {}).get("level", "info"))
    if wanted not in _LEVELS or level not in _LEVELS:
        return True
    return _LEVELS.index(level) >= _LEVELS.index(wanted)


async def _handed_out(link: ClientLink, request: ClientRequest) -> RpcReply:
    """The answer to a request for a detached link, once the ``InputBridge`` handed it out and the
    client's retry brought it (or a timeout error when none comes within the request's bound)."""
    pending = PendingInput(request, asyncio.get_running_loop().create_future())
    link.inputs.put_nowait(pending)
    try:
        return await asyncio.wait_for(asyncio.shield(pending.answer), request.timeout_seconds)
    except TimeoutError:
        return _error_reply(-32001, f"the client did not answer {request.method} in time")


def _bus_error(exc: ToolmeshError) -> RpcReply:
    """A message this replica cannot take, as the JSON-RPC error the upstream gets."""
    if isinstance(exc, ValidationFailed):
        code = mcp_types.INVALID_PARAMS
    elif isinstance(exc, RoutingFailed):
        code = mcp_types.METHOD_NOT_FOUND
    else:
        code = mcp_types.INTERNAL_ERROR
    return _error_reply(code, exc.detail, exc.body())


def _error_reply(code: int, message: str, data: Any = None) -> RpcReply:
    return RpcReply(ok=False, error={"code": code, "message": message, "data": data})


def _session_id(ctx: Ctx) -> str | None:
    headers = getattr(ctx.request, "headers", None)
    value = headers.get("mcp-session-id") if headers is not None else None
    return str(value) if value else None


def _ref(key: str, ctx: Ctx, *, detached: bool = False) -> ClientRef:
    """What the client declared. A 2026-07-28 request can take upstream requests only through the
    ``InputBridge`` (``detached``), never on a stream."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or (ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and not detached):
        return ClientRef(id=key)
    return ClientRef(
        id=key,
        sampling=capabilities.sampling is not None,
        elicitation=capabilities.elicitation is not None,
        roots=capabilities.roots is not None,
    )
