"""``GET /api/v1/events``: the caller's namespace's events as Server-Sent Events.

Authenticated like every endpoint (``Authorization: Bearer``; browsers read it with ``fetch()``
streaming, since ``EventSource`` cannot send headers). Not in the OpenAPI document: the stream
never ends, which OpenAPI cannot describe; ``toolmesh.contracts.stream`` is its contract.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from toolmesh.contracts.stream import EVENTS_PATH, READY, StreamReady
from toolmesh.errors import NamespaceNotFound
from toolmesh.naming import NAMESPACE_PATTERN
from toolmesh_gateway.auth import Principal, require_principal
from toolmesh_gateway.event_hub import EventHub, Subscription

router = APIRouter(tags=["events"])
Auth = Annotated[Principal, Depends(require_principal)]
KEEPALIVE_SECONDS = 15.0
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def message(event: str, data: str, seq: int | None = None) -> str:
    """One SSE message (``data`` is one line of JSON)."""
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n"


async def _messages(hub: EventHub, subscription: Subscription, ready: StreamReady) -> AsyncIterator[str]:
    try:
        yield message(READY, ready.model_dump_json())
        while True:
            try:
                async with asyncio.timeout(KEEPALIVE_SECONDS):  # not wait_for: on 3.11 it can drop a cancel
                    item = await subscription.next()
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            if item is None:
                return
            yield message(item.type, item.model_dump_json(), item.seq)
    finally:
        hub.release(subscription)


@router.get(EVENTS_PATH, include_in_schema=False)
async def event_stream(
    request: Request,
    principal: Auth,
    namespace: Annotated[str | None, Query(pattern=NAMESPACE_PATTERN)] = None,
) -> StreamingResponse:
    """Events of the caller's namespace from now on (the owner: every namespace, or ``namespace``)."""
    if principal.scope is not None and namespace not in (None, principal.scope):
        raise NamespaceNotFound(f"Namespace not found: {namespace}", {"namespace": namespace})
    scope = principal.scope if principal.scope is not None else namespace
    hub: EventHub = request.app.state.event_hub
    subscription = hub.open(principal, scope)
    ready = StreamReady(namespace=scope, role=str(principal.role))
    return StreamingResponse(_messages(hub, subscription, ready), media_type="text/event-stream", headers=HEADERS)
