"""The MCP clients an owned upstream serves: attribution of its server → client traffic, subscriptions, log levels.

Attribution rule (docs/usage.md, "Server → client traffic"):

1. Exact: the upstream sent the message on the stream of one of our requests (Streamable HTTP
   sends a request-related message on that request's POST stream; the SDK hands it that
   request's context, see ``upstream.client_side``): it goes to the client of that request.
2. Otherwise (STDIO, SSE, a Streamable HTTP standalone stream): to the one client that has
   requests in flight on this upstream, when there is exactly one.
3. Otherwise nobody can tell: a request gets a JSON-RPC error (``NO_CLIENT``); a notification
   goes where 1-2 say, log messages also to clients that set a log level here, resource
   updates to the subscribers of that URI, and is dropped when nobody is left.

A client that did not declare the capability a request needs gets no request: the upstream gets
the error at once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from toolmesh.contracts.clients import NO_CLIENT, ClientNotification, ClientRequest
from toolmesh.contracts.rpc import ClientRef, RpcReply
from toolmesh.platform.bus import dispatch, verbs
from toolmesh.platform.bus.interface import Bus
from toolmesh_session_worker.upstream import Upstream

log = logging.getLogger("toolmesh.session.clients")
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
REQUEST_TIMEOUT = -32001
_NOT_FORWARDED = frozenset({"notifications/progress", "notifications/cancelled"})
"""Progress travels per call (``progress_subject``); cancellations are the SDK's own business."""
_CAPABILITY = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}


def attribute(call_id: str | None, inflight: Mapping[str, ClientRef | None]) -> ClientRef | None:
    """The client a message belongs to (rules 1 and 2 above), or None when it cannot be told."""
    if call_id is not None and call_id in inflight:
        return inflight[call_id]
    clients = {ref.id if ref is not None else None: ref for ref in inflight.values()}
    if len(clients) == 1:
        return next(iter(clients.values()))
    return None


def related_call(client: ClientRef, call_id: str | None, inflight: Mapping[str, ClientRef | None]) -> str | None:
    """The request of ``client`` a message rides on: the exact one, else its latest one in flight."""
    if call_id is not None and call_id in inflight:
        return call_id
    mine = [cid for cid, ref in inflight.items() if ref is not None and ref.id == client.id]
    return mine[-1] if mine else None


def declared(client: ClientRef, method: str) -> bool:
    """True when the client declared the capability ``method`` needs."""
    return bool(getattr(client, _CAPABILITY.get(method, ""), False))


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


class UpstreamClients:
    """The client side of one owned upstream session (``upstream.ClientSide``)."""

    def __init__(self, bus: Bus, server_id: str, server_name: str, timeout: float) -> None:
        self._bus = bus
        self._server_id = server_id
        self._server_name = server_name
        self._timeout = timeout
        self.inflight: dict[str, ClientRef | None] = {}
        self.subscriptions: dict[str, dict[str, ClientRef]] = {}  # uri -> holders by client id
        self.levels: dict[str, tuple[ClientRef, str]] = {}  # client id -> (client, level)
        self._lock = asyncio.Lock()

    # -- requests in flight ----------------------------------------------------------------------

    def begin(self, call_id: str | None, client: ClientRef | None) -> None:
        """A request of ``client`` (None: not an MCP client, e.g. REST) is now in flight upstream."""
        if call_id is not None:
            self.inflight[call_id] = client

    def end(self, call_id: str | None) -> None:
        """The request ``call_id`` has finished."""
        if call_id is not None:
            self.inflight.pop(call_id, None)

    # -- ClientSide ------------------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None, call_id: str | None) -> dict[str, Any]:
        """Carry an upstream's request to its client and return the answer (or a JSON-RPC error)."""
        client = attribute(call_id, self.inflight)
        if client is None:
            busy = len(self.inflight)
            why = "no client request is in flight" if not busy else f"{busy} requests of several clients are in flight"
            return _error(NO_CLIENT, f"toolmesh cannot tell which client {method} is for: {why}")
        if not declared(client, method):
            need = _CAPABILITY.get(method, method)
            return _error(NO_CLIENT, f"the client did not declare the {need} capability")
        known = related_call(client, call_id, self.inflight)
        request_id = uuid.uuid4().hex
        body = ClientRequest(
            server_id=self._server_id,
            server_name=self._server_name,
            method=method,
            params=params,
            call_id=known,
            timeout_seconds=self._timeout,
            request_id=request_id,
        )
        try:
            data = await dispatch.request(self._bus, verbs.CLIENT_REQUEST, client.id, body, timeout=self._timeout)
        except NoRespondersError:
            return _error(NO_CLIENT, "the client session is gone")
        except NatsTimeout:
            await self._withdraw(client, request_id)
            return _error(REQUEST_TIMEOUT, f"the client did not answer {method} within {self._timeout:g}s")
        except asyncio.CancelledError:  # the upstream cancelled its request
            await asyncio.shield(self._withdraw(client, request_id))
            raise
        reply = RpcReply.model_validate_json(data)
        if reply.ok:
            return reply.result or {}
        return {"error": reply.error or {"code": NO_CLIENT, "message": "client error"}}

    async def notification(self, method: str, params: dict[str, Any] | None, call_id: str | None) -> None:
        """Deliver an upstream's notification to the clients it concerns."""
        for client, related in self._targets(method, params or {}, call_id):
            body = ClientNotification(
                server_id=self._server_id, server_name=self._server_name, method=method, params=params, call_id=related
            )
            await dispatch.publish(self._bus, verbs.CLIENT_NOTIFY, client.id, body)

    def _targets(
        self, method: str, params: Mapping[str, Any], call_id: str | None
    ) -> list[tuple[ClientRef, str | None]]:
        if method in _NOT_FORWARDED:
            return []
        exact = call_id if call_id in self.inflight else None
        owner = attribute(call_id, self.inflight)
        if owner is not None:
            exact = related_call(owner, call_id, self.inflight)
        if method == "notifications/resources/updated":
            holders = self.subscriptions.get(str(params.get("uri")), {})
            return [(client, None) for client in holders.values()]
        targets: dict[str, tuple[ClientRef, str | None]] = {}
        if owner is not None:
            targets[owner.id] = (owner, exact)
        if method == "notifications/message" and exact is None:
            for client, _ in self.levels.values():
                targets.setdefault(client.id, (client, None))
        if method == "notifications/message":
            level = str(params.get("level", "info"))
            targets = {k: v for k, v in targets.items() if _at_least(level, self.levels.get(k))}
        return list(targets.values())

    async def _withdraw(self, client: ClientRef, request_id: str) -> None:
        body = ClientNotification(
            server_id=self._server_id,
            server_name=self._server_name,
            method="notifications/cancelled",
            params={"requestId": request_id, "reason": "the upstream gave up"},
        )
        try:
            await dispatch.publish(self._bus, verbs.CLIENT_NOTIFY, client.id, body)
        except Exception as exc:  # best effort: the client's own timeout ends it too
            log.debug("could not withdraw a client request: %s", exc)

    # -- subscriptions and log levels ------------------------------------------------------------

    async def subscribe(self, session: Upstream, uri: str, client: ClientRef) -> None:
        """Add ``client`` to the holders of ``uri``; the first holder subscribes upstream."""
        async with self._lock:
            holders = self.subscriptions.get(uri)
            if not holders:
                await session.request("resources/subscribe", {"uri": uri}, timeout=self._timeout)
                holders = self.subscriptions[uri] = {}
            holders[client.id] = client

    async def unsubscribe(self, session: Upstream | None, uri: str, client: ClientRef) -> None:
        """Remove ``client`` from the holders of ``uri``; the last one leaving unsubscribes upstream."""
        async with self._lock:
            holders = self.subscriptions.get(uri)
            if holders is None or holders.pop(client.id, None) is None or holders:
                return
            del self.subscriptions[uri]
            if session is not None and session.alive:
                await session.request("resources/unsubscribe", {"uri": uri}, timeout=self._timeout)

    async def set_level(self, session: Upstream, level: str, client: ClientRef) -> None:
        """Record the client's level and give the upstream the most verbose level any client wants."""
        async with self._lock:
            self.levels[client.id] = (client, level)
            await session.request("logging/setLevel", {"level": self.upstream_level()}, timeout=self._timeout)

    def upstream_level(self) -> str:
        """The most verbose level a client asked for (``info`` when none did)."""
        asked = [LOG_LEVELS.index(level) for _, level in self.levels.values() if level in LOG_LEVELS]
        return LOG_LEVELS[min(asked)] if asked else "info"

    async def forget(self, session: Upstream | None, client: ClientRef) -> None:
        """A client session ended: release its subscriptions and its log level."""
        for uri in [uri for uri, holders in self.subscriptions.items() if client.id in holders]:
            await self.unsubscribe(session, uri, client)
        self.levels.pop(client.id, None)

    async def restore(self, session: Upstream) -> None:
        """After a reconnect: subscribe the new upstream session again and give it the log level."""
        for uri in list(self.subscriptions):
            await session.request("resources/subscribe", {"uri": uri}, timeout=self._timeout)
        if self.levels:
            await session.request("logging/setLevel", {"level": self.upstream_level()}, timeout=self._timeout)


def _at_least(level: str, wanted: tuple[ClientRef, str] | None) -> bool:
    """True when a message at ``level`` passes a client's own level (no level set: everything passes)."""
    if wanted is None or wanted[1] not in LOG_LEVELS or level not in LOG_LEVELS:
        return True
    return LOG_LEVELS.index(level) >= LOG_LEVELS.index(wanted[1])
