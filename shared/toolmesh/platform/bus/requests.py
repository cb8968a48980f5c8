"""Requests to the session-worker that owns a server (``toolmesh.rpc.<server_id>.<verb>``), and the
``RpcReply`` envelope both sides speak.

A tool result can be large: the owner puts the upstream's JSON into the envelope as it is
(``ok_reply``) and the requester reads it once (``reply_result``), so it is never decoded and
encoded again on its way through the bus. An owner in the requester's own process gets the request
without NATS (``LocalFirstBus``: the owner's subscription is owned).
"""

from __future__ import annotations

import json
from typing import Any

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from opentelemetry.trace import SpanKind
from pydantic import BaseModel

from toolmesh.errors import SessionNotFound, ToolmeshError, error_from_body
from toolmesh.platform.admission import deadline_headers
from toolmesh.platform.bus import verbs
from toolmesh.platform.bus.fencing import FENCE_FIELD, Fences
from toolmesh.platform.bus.interface import Bus
from toolmesh.platform.telemetry import mark_error, outgoing_headers, span

_RPC_VERBS = verbs.family_verbs(verbs.RPC)


def rpc_verb(name: str) -> verbs.Verb:
    """The ``rpc`` verb of the registry called ``name``; ``ValueError`` for a name it does not have."""
    verb = _RPC_VERBS.get(name)
    if verb is None:
        raise ValueError(f"{name} is not an rpc verb (toolmesh.platform.bus.verbs)")
    return verb


class NoOwner(SessionNotFound):
    """Nobody holds a session for the server (NATS "no responders")."""


_OK_PREFIX = b'{"ok":true,"result":'


def ok_reply(result: bytes) -> bytes:
    """An ``RpcReply`` with ``ok`` and ``result``, the JSON of an object already encoded."""
    return _OK_PREFIX + result + b"}"


def reply_result(data: bytes) -> dict[str, Any]:
    """The result of an ``RpcReply``, or raise the error (of the error table) it carries."""
    return _result(json.loads(data))


def _result(reply: dict[str, Any]) -> dict[str, Any]:
    if not reply.get("ok"):
        raise error_from_body(reply.get("error") or {})
    result: dict[str, Any] = reply.get("result") or {}
    return result


async def request_owner(
    bus: Bus,
    server_id: str,
    verb: str,
    payload: bytes,
    *,
    timeout: float,
    server_name: str | None = None,
    deadline: float | None = None,
    fences: Fences | None = None,
) -> dict[str, Any]:
    """Send ``payload`` to the server's owner and return its result, or raise the error it answered;
    ``NoOwner`` when nobody holds the session; with ``fences``, ``ServerUnavailable`` for the late
    reply of an owner that was deposed (``fencing``). A NATS timeout propagates: what it means (a
    session that did not answer, or a call to cancel) is the caller's to say. ``deadline``: the
    seconds from now after which the owner must not start the work (its ``Toolmesh-Deadline`` header)."""
    subject = rpc_verb(verb).subject(server_id)
    headers = outgoing_headers(deadline_headers(deadline) if deadline is not None else None)
    try:
        data = await bus.request(subject, payload, timeout=timeout, headers=headers)
    except NoRespondersError as exc:
        name = server_name or server_id
        raise NoOwner(f"No active session for server {name}", {"server_id": server_id}) from exc
    reply = json.loads(data)
    if fences is not None:
        await fences.check(server_id, reply.get(FENCE_FIELD), server_name)
    return _result(reply)


async def tell_owner(bus: Bus, server_id: str, verb: str, payload: bytes) -> None:
    """Send ``payload`` to the server's owner without waiting for an answer (e.g. ``cancel``)."""
    await bus.publish(rpc_verb(verb).subject(server_id), payload, headers=outgoing_headers())


async def ask_owner(bus: Bus, server_id: str, verb: str, body: BaseModel, *, timeout: float) -> dict[str, Any]:
    """Send one request to the owner and return its result, or raise the error it answered; ``body``
    is the verb's request model (``TypeError`` otherwise)."""
    declared = rpc_verb(verb)
    if not isinstance(body, declared.request):
        raise TypeError(f"rpc verb {verb} takes {declared.request.__name__}, not {type(body).__name__}")
    subject = declared.subject(server_id)
    attributes = {"messaging.system": "nats", "messaging.destination.name": subject, "toolmesh.server_id": server_id}
    with span(f"nats request {verb}", kind=SpanKind.CLIENT, attributes=attributes) as current:
        try:
            return await request_owner(bus, server_id, verb, body.model_dump_json().encode(), timeout=timeout)
        except NoOwner:
            mark_error(current, "no responders")
            raise
        except NatsTimeout as exc:
            mark_error(current, "timeout")
            raise SessionNotFound(
                f"The session of server {server_id} did not answer within {timeout:.0f}s",
                {"server_id": server_id, "verb": verb},
            ) from exc
        except ToolmeshError as exc:
            mark_error(current, exc.error_code)
            raise
