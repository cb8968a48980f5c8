"""MCP requests other than tool calls, forwarded to the owner of a server (``request`` and friends).

The owner sends ``method`` + ``params`` to the upstream unchanged and replies with its raw result;
a JSON-RPC error of the upstream comes back as ``ExecutionFailed`` carrying ``upstream_error``.
Timeouts and a caller that goes away cancel the request upstream, like tool calls.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from nats.errors import TimeoutError as NatsTimeout
from pydantic import BaseModel

from toolmesh.contracts.rpc import (
    CancelCallRpc,
    ClientRef,
    UpstreamRequestRpc,
)
from toolmesh.errors import ExecutionTimeout
from toolmesh.platform.bus.interface import Bus
from toolmesh.platform.bus.requests import NoOwner, ask_owner, request_owner, tell_owner
from toolmesh.platform.config import Settings
from toolmesh_gateway.auth import Caller
from toolmesh_gateway.progress_relay import ProgressSink, relaying_progress
from toolmesh_gateway.routing import ServerRoute
from toolmesh_gateway.tool_calls import REPLY_GRACE_SECONDS, ToolCalls

log = logging.getLogger("toolmesh.gateway.forwarding")
CONTROL_TIMEOUT_SECONDS = 30.0
"""Bound of subscribe / unsubscribe / set_level / client_gone requests to an owner."""


class Forwarder:
    """Sends MCP requests to the owners of servers."""

    def __init__(self, bus: Bus, calls: ToolCalls, settings: Settings) -> None:
        self._bus = bus
        self._calls = calls
        self._default_timeout = settings.request_timeout_seconds

    async def request(
        self,
        server: ServerRoute,
        method: str,
        params: dict[str, Any] | None,
        *,
        client: ClientRef | None = None,
        timeout: float | None = None,
        progress: ProgressSink | None = None,
        call_id: str | None = None,
        caller: Caller | None = None,
        envelope: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The upstream's raw result of one request (a session is requested when nobody holds one);
        a per-user server answers ``caller`` as its own upstream user; ``envelope``: a 2026-07-28
        client's (``UpstreamRequestRpc.envelope``)."""
        body = UpstreamRequestRpc(
            method=method,
            params=params,
            timeout_seconds=timeout or self._default_timeout,
            call_id=call_id or self._calls.new_call_id(),
            progress=progress is not None,
            client=client,
            principal=caller.principal.key_id if caller is not None else None,
            envelope=envelope,
        )
        attempt = functools.partial(
            self._calls.sessions.with_session, server, lambda: self._listening(server, body, progress)
        )
        return await (attempt() if caller is None else self._calls.authorized(caller, attempt))

    def new_call_id(self) -> str:
        """A fresh call id (to register a call with its client before sending it)."""
        return self._calls.new_call_id()

    async def control(
        self, server: ServerRoute, verb: str, body: BaseModel, caller: Caller | None = None
    ) -> dict[str, Any]:
        """One of ``subscribe``, ``unsubscribe``, ``set_level``, ``client_gone``, asking for a session if
        needed; a per-user server's refusal comes with the URL at which ``caller`` authorizes."""
        attempt = functools.partial(self._control, server, verb, body)
        return await (attempt() if caller is None else self._calls.authorized(caller, attempt))

    async def _control(self, server: ServerRoute, verb: str, body: BaseModel) -> dict[str, Any]:
        try:
            return await ask_owner(self._bus, server.id, verb, body, timeout=CONTROL_TIMEOUT_SECONDS)
        except NoOwner:
            await self._calls.sessions.reconnect(server)
            return await ask_owner(self._bus, server.id, verb, body, timeout=CONTROL_TIMEOUT_SECONDS)

    async def _listening(
        self, server: ServerRoute, body: UpstreamRequestRpc, progress: ProgressSink | None
    ) -> dict[str, Any]:
        async with relaying_progress(self._bus, body.call_id, progress):
            return await self._send(server, body)

    async def _send(self, server: ServerRoute, body: UpstreamRequestRpc) -> dict[str, Any]:
        payload = body.model_dump_json().encode()
        timeout = body.timeout_seconds + REPLY_GRACE_SECONDS
        try:
            return await request_owner(
                self._bus,
                server.id,
                "request",
                payload,
                timeout=timeout,
                server_name=server.name,
                deadline=body.timeout_seconds,
                fences=self._calls.fences,
            )
        except NatsTimeout as exc:
            await self._cancel(server, body)
            raise ExecutionTimeout(
                f"{body.method} on {server.name} got no answer within {body.timeout_seconds:g}s; it was cancelled",
                {"server": server.name, "method": body.method, "timeout_seconds": body.timeout_seconds},
            ) from exc
        except asyncio.CancelledError:
            await asyncio.shield(self._cancel(server, body))
            raise

    async def _cancel(self, server: ServerRoute, body: UpstreamRequestRpc) -> None:
        assert body.call_id is not None
        payload = CancelCallRpc(call_id=body.call_id).model_dump_json().encode()
        try:
            await tell_owner(self._bus, server.id, "cancel", payload)
        except Exception as exc:  # best effort: the owner's own timeout still ends the request
            log.warning("could not cancel %s on %s: %s", body.method, server.name, exc)
