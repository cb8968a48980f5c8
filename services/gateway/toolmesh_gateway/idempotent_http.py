"""``Idempotency-Key`` on the REST write endpoints, with the store the NATS API uses.

A pure ASGI middleware: for a ``POST``/``PUT``/``PATCH``/``DELETE`` under ``/api/`` that carries the
header and a valid bearer key, it buffers the request body, runs the route once through the
store, and sends the response it kept (``Idempotent-Replayed: true`` on a replay). A request the
route refuses as invalid (401, 422) is answered but not kept, so it can be corrected and retried.
"""

from __future__ import annotations

import json

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolmesh.contracts.api import IDEMPOTENCY_HEADER, REPLAYED_HEADER
from toolmesh.errors import Forbidden, RateLimited, ToolmeshError, Unauthorized
from toolmesh_gateway.admission import shed_reply
from toolmesh_gateway.auth import Authenticator
from toolmesh_gateway.errors import error_response
from toolmesh_gateway.idempotency import IdempotencyStore, Stored, fingerprint

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
NOT_KEPT = frozenset({401, 422, 429, 499})
"""Not kept for the key: refused before anything ran (401, 422, 429: a rate limit), or abandoned by the
client (499: the tool call was cancelled upstream), so a retry runs again."""


def _canonical(body: bytes) -> bytes:
    """The body as sorted compact JSON when it is JSON (so formatting does not count), else as is."""
    try:
        return json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode()
    except (ValueError, RecursionError):  # not JSON, or nested too deep for the parser: as sent
        return body


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send_stored(send: Send, stored: Stored, replayed: bool) -> None:
    headers = [(b"content-length", str(len(stored.body.encode())).encode())]
    if stored.media_type:
        headers.append((b"content-type", stored.media_type.encode()))
    if replayed:
        headers.append((REPLAYED_HEADER.lower().encode(), b"true"))
    await send({"type": "http.response.start", "status": stored.status, "headers": headers})
    await send({"type": "http.response.body", "body": stored.body.encode()})


class IdempotencyMiddleware:
    """Applies a REST write once per ``Idempotency-Key`` and principal, across gateway replicas."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITES or not scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        key = headers.get(IDEMPOTENCY_HEADER)
        if key is None:
            await self.app(scope, receive, send)
            return
        state = scope["app"].state
        authenticator: Authenticator = state.authenticator
        store: IdempotencyStore = state.idempotency
        client = scope.get("client")
        try:  # counted against the client's address like every other authentication
            principal = await authenticator.principal_from(headers.get("authorization"), client[0] if client else None)
            if principal.audience is not None:  # an OAuth token: its key's stored answers are not for it
                principal.require_api_access()
        except (Unauthorized, RateLimited, Forbidden) as exc:
            await error_response(exc)(scope, receive, send)
            return
        body = await _read_body(receive)
        request = fingerprint("http", scope["method"], scope["path"], scope.get("query_string", b""), _canonical(body))

        async def work() -> Stored:
            return await self._run(scope, body, receive)

        try:
            stored, replayed = await store.run(
                principal.key_id, key, request, work, keep=lambda s: s.status not in NOT_KEPT and not shed_reply(s)
            )
        except ToolmeshError as exc:
            stored, replayed = Stored(exc.status, json.dumps(exc.body())), False
        await _send_stored(send, stored, replayed)

    async def _run(self, scope: Scope, body: bytes, receive: Receive) -> Stored:
        """Run the route with the buffered body and capture its response."""
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # e.g. http.disconnect: a tool call is cancelled upstream

        status = 500
        media_type: str | None = None
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal status, media_type
            if message["type"] == "http.response.start":
                status = message["status"]
                media_type = Headers(raw=message.get("headers", [])).get("content-type")
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, replay, capture)
        return Stored(status, b"".join(chunks).decode(), media_type)
