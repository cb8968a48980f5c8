"""Progress of a tool call, relayed from its owner to the caller while the call runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from toolmesh.contracts.rpc import ToolProgress, progress_subject
from toolmesh.platform.bus.interface import Bus, Message

log = logging.getLogger("toolmesh.gateway.calls")
ProgressSink = Callable[[ToolProgress], Awaitable[None]]
PROGRESS_DRAIN_SECONDS = 1.0
"""How long progress already sent by the owner may take to arrive before the result is returned."""


@contextlib.asynccontextmanager
async def relaying_progress(bus: Bus, call_id: str | None, progress: ProgressSink | None) -> AsyncIterator[None]:
    """While the block runs, hand each progress update published for ``call_id`` to ``progress``
    (nothing when either is None); updates already received are delivered before the block's result."""
    if progress is None or call_id is None:
        yield
        return
    sink = progress

    async def forward(msg: Message) -> None:
        try:
            await sink(ToolProgress.model_validate_json(msg.data))
        except Exception as exc:  # a client that cannot take progress still gets its result
            log.debug("progress not delivered: %s", exc)

    sub = await bus.subscribe(progress_subject(call_id), forward)
    try:
        yield
    finally:
        try:
            await asyncio.wait_for(sub.drain(), PROGRESS_DRAIN_SECONDS)
        except Exception as exc:  # the connection may be closing; the subscription dies with it
            log.debug("progress unsubscribe failed: %s", exc)
