"""Serving and sending the internal verbs of ``bus.verbs``: validation, payload limits, spans and trace
headers in one place, for both directions (``rpc`` toward an owner, ``client`` toward a client).

A ``Dispatcher`` reads the verb from the subject, decodes the payload with the verb's request model
(a body it refuses is answered with ``VALIDATION_ERROR``, an unknown verb with ``ROUTING_FAILED``),
runs the handler inside a server span that continues the sender's trace (its ``traceparent``
header), and encodes the reply: the handler's model as an ``RpcReply``, raw JSON bytes (a peer's
result passed through) without decoding them, a ``ToolmeshError`` as the family's error reply, NATS
being unreachable as ``BACKEND_UNAVAILABLE``, any other exception (logged) as ``ROUTING_FAILED``
naming the verb: a sender never waits out its timeout for a handler that failed. A reply over the
connection's limit is refused the same way. With ``fence``, every reply carries the fencing token it
gives (``fencing``). ``request`` and ``publish`` send a verb with the sender's trace headers inside a
client span.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from opentelemetry.trace import SpanKind
from pydantic import BaseModel

from toolmesh.contracts.rpc import RpcReply
from toolmesh.errors import BackendUnavailable, ExecutionFailed, RoutingFailed, ToolmeshError
from toolmesh.payloads import parse_payload
from toolmesh.platform.bus.fencing import stamped
from toolmesh.platform.bus.interface import Bus, Message
from toolmesh.platform.bus.requests import ok_reply
from toolmesh.platform.bus.unreachable import NATS_UNREACHABLE
from toolmesh.platform.bus.verbs import Family, UnknownSubject, Verb
from toolmesh.platform.telemetry import adopt_trace, mark_error, outgoing_headers, span

log = logging.getLogger("toolmesh.bus")
Result = BaseModel | bytes | None
"""What a handler returns: a result model, an ``RpcReply`` it built itself, a result's raw JSON, or
None (an empty ``ok``: what a handler of a verb without reply returns)."""
Handler = Callable[[str, Any], Awaitable[Result]]
"""A verb's handler: called with the subject's key (server id, client id) and the decoded request."""
ErrorReply = Callable[[ToolmeshError], RpcReply]
Oversize = Callable[[Verb, Any, int, int], ToolmeshError]
"""The error for a reply to ``(verb, request)`` of ``size`` bytes over ``limit``."""


def error_reply(exc: ToolmeshError) -> RpcReply:
    """The error reply of the error table: ``{"ok": false, "error": {"detail", "error_code", ...}}``."""
    return RpcReply(ok=False, error=exc.body())


def too_large(verb: Verb, body: Any, size: int, limit: int) -> ToolmeshError:
    """``EXECUTION_FAILED`` naming the reply's size and the limit."""
    return ExecutionFailed(
        f"The reply to {verb.name} is {size} bytes, over the {limit} byte limit of a reply",
        {"verb": verb.name, "result_bytes": size, "limit_bytes": limit},
    )


def encode_result(result: Result) -> bytes:
    """The reply carrying ``result`` (raw JSON is put in the envelope as it is)."""
    if result is None:
        return RpcReply(ok=True).model_dump_json().encode()
    if isinstance(result, bytes):
        return ok_reply(result)
    if isinstance(result, RpcReply):
        return result.model_dump_json().encode()
    return RpcReply(ok=True, result=result.model_dump()).model_dump_json().encode()


class Dispatcher:
    """Serves the verbs of one family that ``handlers`` name."""

    def __init__(
        self,
        family: Family,
        handlers: Mapping[Verb, Handler],
        *,
        span_name: str,
        errors: ErrorReply = error_reply,
        reply_limit: Callable[[], int] | None = None,
        oversize: Oversize = too_large,
        fence: Callable[[], int | None] | None = None,
    ) -> None:
        strangers = [verb.name for verb in handlers if verb.family is not family]
        if strangers:
            raise ValueError(f"verbs of another family than {family.name}: {strangers}")
        self.family = family
        self._handlers = {verb.name: (verb, handler) for verb, handler in handlers.items()}
        self._span_name = span_name
        self._errors = errors
        self._reply_limit = reply_limit
        self._oversize = oversize
        self._fence = fence

    def verb_of(self, subject: str) -> Verb | None:
        """The verb a subject of this family names, None when this dispatcher serves no such verb."""
        try:
            served = self._handlers.get(self.family.parse(subject)[1])
        except UnknownSubject:
            return None
        return served[0] if served is not None else None

    async def dispatch(self, msg: Message, attributes: Mapping[str, str] | None = None) -> None:
        """Handle one message in a span continuing its sender's trace; answer it when it has a reply subject."""
        try:
            key, name = self.family.parse(msg.subject)
        except UnknownSubject as exc:
            if msg.reply:
                await msg.respond(self._errors(RoutingFailed(str(exc))).model_dump_json().encode())
            return
        tags = {"messaging.system": "nats", "messaging.destination.name": msg.subject, "toolmesh.verb": name}
        with span(
            f"{self._span_name} {name}",
            kind=SpanKind.SERVER,
            remote=msg.headers or {},
            attributes=tags | dict(attributes or {}),
        ) as current:
            adopt_trace(msg.headers)
            reply, failed = await self._reply(key, name, msg.data)
            if failed is not None:
                mark_error(current, failed)
        token = self._fence() if self._fence is not None else None
        if token is not None:
            reply = stamped(reply, token)
        if msg.reply:  # once the span has ended: a sender that got the reply finds the handling recorded
            await msg.respond(reply)

    async def _reply(self, key: str, name: str, data: bytes) -> tuple[bytes, str | None]:
        served = self._handlers.get(name)
        try:
            if served is None:
                raise RoutingFailed(f"Unknown request verb: {name}")
            verb, handler = served
            body = parse_payload(verb.request, data)
            reply = encode_result(await handler(key, body))
            limit = self._reply_limit() if self._reply_limit is not None else None
            if limit is not None and len(reply) > limit:
                raise self._oversize(verb, body, len(reply), limit)
        except ToolmeshError as exc:
            return self._errors(exc).model_dump_json().encode(), exc.error_code
        except NATS_UNREACHABLE as exc:  # the handler's own use of NATS failed: worth a retry
            unreachable = BackendUnavailable(f"NATS unreachable: {type(exc).__name__}: {exc}", {"verb": name})
            return self._errors(unreachable).model_dump_json().encode(), unreachable.error_code
        except Exception as exc:  # a bug or an input nobody foresaw: answered, never left to time out
            log.exception("%s %s failed on its handler", self._span_name, name)
            failed = RoutingFailed(
                f"{name} failed on its handler ({type(exc).__name__}); "
                "the log of the process that handled it says more",
                {"verb": name},
            )
            return self._errors(failed).model_dump_json().encode(), failed.error_code
        return reply, None


def _payload(verb: Verb, body: BaseModel) -> bytes:
    if not isinstance(body, verb.request):
        raise TypeError(f"{verb.family.name}.{verb.name} takes {verb.request.__name__}, not {type(body).__name__}")
    return body.model_dump_json().encode()


def _tags(verb: Verb, subject: str) -> dict[str, str]:
    return {"messaging.system": "nats", "messaging.destination.name": subject, "toolmesh.verb": verb.name}


async def request(bus: Bus, verb: Verb, key: str, body: BaseModel, *, timeout: float) -> bytes:
    """Send ``body`` as ``verb`` to ``key`` with the sender's trace headers; the reply's data.
    NATS's ``NoRespondersError`` and ``TimeoutError`` propagate: what they mean is the caller's to say."""
    subject = verb.subject(key)
    with span(f"nats request {verb.name}", kind=SpanKind.CLIENT, attributes=_tags(verb, subject)):
        return await bus.request(subject, _payload(verb, body), timeout=timeout, headers=outgoing_headers())


async def publish(bus: Bus, verb: Verb, key: str, body: BaseModel) -> None:
    """Publish ``body`` as ``verb`` (no reply) to ``key`` with the sender's trace headers."""
    subject = verb.subject(key)
    with span(f"nats publish {verb.name}", kind=SpanKind.PRODUCER, attributes=_tags(verb, subject)):
        await bus.publish(subject, _payload(verb, body), headers=outgoing_headers())
